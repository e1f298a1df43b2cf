// Package k8s holds the Kubernetes manifests (a kustomize base and the
// source-site and target-site overlays) and the test that renders them
// offline and decodes every object strictly with the Kubernetes API types.
package k8s

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var overlays = map[string]struct {
	namespace, queue string
	// roles is the worker's SLUICE_WORKER_ROLES.
	roles   string
	cronJob string
	// Secrets the site's worker may read, and Secrets it must not.
	secrets, foreign []string
}{
	"source-site": {"sluice-source", "sluice-source", "producer", "sluice-prune",
		[]string{"sluice-source-db", "sluice-store", "sluice-admin-token", "sluice-admin-tls"}, []string{"sluice-target-db"}},
	"target-site": {"sluice-target", "sluice-target", "broker,restore,maintenance", "sluice-verify",
		[]string{"sluice-target-db", "sluice-store", "sluice-source-readonly", "sluice-admin-token", "sluice-admin-tls"}, []string{"sluice-source-db"}},
}

func strictDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
}

// render runs `kubectl kustomize` on a directory and decodes every document
// strictly: an unknown or duplicated field, or a kind outside the scheme, fails.
func render(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed (Debian's kubernetes-client); it renders the kustomizations offline")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return decodeAll(t, strictDecoder(t), stdout.Bytes())
}

func decodeAll(t *testing.T, dec runtime.Decoder, data []byte) []runtime.Object {
	t.Helper()
	objs, err := tryDecodeAll(dec, data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func tryDecodeAll(dec runtime.Decoder, data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", firstLine(doc), err)
		}
		objs = append(objs, obj)
	}
}

func firstLine(doc []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(doc)), "\n")
	return s
}

func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	dec := strictDecoder(t)
	bad := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 2\n")
	if _, err := tryDecodeAll(dec, bad); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("an unknown field decoded: %v", err)
	}
	unknownKind := []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: x\n")
	if _, err := tryDecodeAll(dec, unknownKind); err == nil {
		t.Fatal("a kind outside the scheme decoded")
	}
}

func TestBaseRenders(t *testing.T) {
	objs := render(t, "base")
	if d := only[*appsv1.Deployment](t, objs); d.Name != "sluice-worker" {
		t.Fatalf("deployment %s", d.Name)
	}
}

func TestOverlays(t *testing.T) {
	for name, want := range overlays {
		t.Run(name, func(t *testing.T) {
			objs := render(t, "overlays/"+name)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[kindOf(o)]++
				if m, ok := o.(interface{ GetNamespace() string }); ok && m.GetNamespace() != want.namespace {
					t.Errorf("%T in namespace %q, want %q", o, m.GetNamespace(), want.namespace)
				}
				if _, ok := o.(*corev1.Secret); ok {
					t.Errorf("a Secret is rendered: secrets are only referenced")
				}
			}
			for _, k := range []string{"Deployment", "PodDisruptionBudget", "ConfigMap", "ServiceAccount", "CronJob"} {
				if kinds[k] != 1 {
					t.Errorf("%d %s objects, want 1 (all kinds: %v)", kinds[k], k, kinds)
				}
			}
			dep := only[*appsv1.Deployment](t, objs)
			cm := only[*corev1.ConfigMap](t, objs)
			if cm.Data["SLUICE_TASK_QUEUE"] != want.queue || cm.Data["TEMPORAL_NAMESPACE"] != want.namespace || cm.Data["SLUICE_WORKER_ROLES"] != want.roles {
				t.Errorf("worker environment %v", cm.Data)
			}
			checkWorker(t, dep, cm)
			checkPDB(t, only[*policyv1.PodDisruptionBudget](t, objs), dep)
			cj := only[*batchv1.CronJob](t, objs)
			if cj.Name != want.cronJob || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
				t.Errorf("cronjob %s, concurrency %s", cj.Name, cj.Spec.ConcurrencyPolicy)
			}
			pod := cj.Spec.JobTemplate.Spec.Template.Spec
			checkPod(t, "cronjob "+cj.Name, pod)
			if c := pod.Containers[0]; len(c.Command) < 2 || c.Command[0] != "/usr/local/bin/sluice" {
				t.Errorf("cronjob %s runs %q, want /usr/local/bin/sluice …", cj.Name, c.Command)
			}
			used := secretsUsed(dep.Spec.Template.Spec)
			for _, s := range want.foreign {
				if used[s] {
					t.Errorf("the %s worker reads Secret %s, which belongs to the other site", name, s)
				}
			}
			for _, s := range want.secrets {
				if !used[s] {
					t.Errorf("the %s worker does not reference Secret %s", name, s)
				}
			}
			for s := range used {
				if !contains(want.secrets, s) {
					t.Errorf("the %s worker references Secret %s, which the test does not expect", name, s)
				}
			}
		})
	}
}

func checkWorker(t *testing.T, dep *appsv1.Deployment, cm *corev1.ConfigMap) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("worker replicas %v, want 2 or more beside a PodDisruptionBudget", dep.Spec.Replicas)
	}
	tmpl := dep.Spec.Template
	a := tmpl.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "9464" || a["prometheus.io/path"] != "/metrics" || a["prometheus.io/scheme"] != "https" {
		t.Errorf("scrape annotations %v", a)
	}
	checkPod(t, "worker", tmpl.Spec)
	c := tmpl.Spec.Containers[0]
	if len(c.Command) != 0 || len(c.Args) != 0 {
		t.Errorf("worker overrides the image's entrypoint: %q %q", c.Command, c.Args)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "admin" || c.Ports[0].ContainerPort != 9464 {
		t.Errorf("worker ports %v", c.Ports)
	}
	for probe, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("worker has no HTTP %s probe", probe)
			continue
		}
		want := map[string]string{"liveness": "/livez", "readiness": "/readyz", "startup": "/livez"}[probe]
		if p.HTTPGet.Path != want || p.HTTPGet.Port.String() != "admin" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("%s probe %s %s %s, want %s on admin over HTTPS", probe, p.HTTPGet.Scheme, p.HTTPGet.Path, p.HTTPGet.Port.String(), want)
		}
	}
	// The admin endpoint off loopback needs a token and TLS, read from
	// files the Deployment mounts.
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = true
		if m.MountPath != "/tmp" && !m.ReadOnly {
			t.Errorf("mount %s is writable", m.MountPath)
		}
	}
	if cm.Data["SLUICE_ADMIN_ADDR"] != "0.0.0.0:9464" {
		t.Errorf("SLUICE_ADMIN_ADDR %q", cm.Data["SLUICE_ADMIN_ADDR"])
	}
	for _, k := range []string{"SLUICE_ADMIN_TOKEN_FILE", "SLUICE_ADMIN_TLS_CERT", "SLUICE_ADMIN_TLS_KEY"} {
		p := cm.Data[k]
		i := strings.LastIndex(p, "/")
		if i <= 0 || !mounts[p[:i]] {
			t.Errorf("%s=%q is not under a mounted volume", k, p)
		}
	}
	if !mounts["/tmp"] {
		t.Error("no writable /tmp beside the read-only root filesystem")
	}
	if q := c.Resources.Requests.Memory(); q.Value() < 200<<20 {
		t.Errorf("memory request %s is below the worker's measured peak of about 200 MiB", q)
	}
	if q := c.Resources.Limits.Memory(); q.Cmp(*c.Resources.Requests.Memory()) < 0 {
		t.Errorf("memory limit %s below its request", q)
	}
}

var secretish = regexp.MustCompile(`(?i)password|secret|token|key`)

// checkPod checks what every pod of sluice must hold: the image's non-root
// user, no privilege, no writable root filesystem, no API token, resources,
// and secrets only by reference.
func checkPod(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s mounts a service account token", what)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s pod securityContext %+v", what, psc)
	}
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("%s has %d containers", what, len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 ||
		(sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("%s container securityContext %+v", what, sc)
	}
	if !strings.HasPrefix(c.Image, "registry.example.com/sluice:") {
		t.Errorf("%s image %q: the kustomization's images entry did not apply", what, c.Image)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s resources %+v", what, c.Resources)
	}
	for _, e := range c.Env {
		if e.Value != "" && secretish.MatchString(e.Name) {
			t.Errorf("%s sets %s by value: reference a Secret", what, e.Name)
		}
	}
	for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
		if strings.Contains(arg, "://") && strings.Contains(arg, "@") && strings.Contains(strings.SplitN(strings.SplitN(arg, "://", 2)[1], "@", 2)[0], ":") {
			t.Errorf("%s passes a DSN with a password: %s", what, arg)
		}
	}
}

func checkPDB(t *testing.T, pdb *policyv1.PodDisruptionBudget, dep *appsv1.Deployment) {
	t.Helper()
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || int32(pdb.Spec.MinAvailable.IntValue()) >= *dep.Spec.Replicas {
		t.Errorf("PodDisruptionBudget minAvailable %v with %d replicas", pdb.Spec.MinAvailable, *dep.Spec.Replicas)
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("PodDisruptionBudget selects %s=%s, which the worker's pods lack", k, v)
		}
	}
}

// secretsUsed lists the Secrets a pod reads, through env, envFrom or volumes.
func secretsUsed(spec corev1.PodSpec) map[string]bool {
	used := map[string]bool{}
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				used[e.ValueFrom.SecretKeyRef.Name] = true
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				used[e.SecretRef.Name] = true
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			used[v.Secret.SecretName] = true
		}
	}
	return used
}

func only[T runtime.Object](t *testing.T, objs []runtime.Object) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if x, ok := o.(T); ok {
			found = append(found, x)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d objects of type %T, want 1", len(found), zero)
	}
	return found[0]
}

// kindOf is the Go type's name, which is the object's kind.
func kindOf(o runtime.Object) string {
	n := fmt.Sprintf("%T", o)
	return n[strings.LastIndex(n, ".")+1:]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
