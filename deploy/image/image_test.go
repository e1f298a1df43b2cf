package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// fakeMain stands in for both binaries in the fast tests: a static Go
// program that says who it is and what it was asked.
const fakeMain = `package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() { fmt.Printf("%s %v uid=%d\n", filepath.Base(os.Args[0]), os.Args[1:], os.Getuid()) }
`

var fakes struct {
	sync.Mutex
	dir  string
	bins map[string]string // GOARCH → binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fakes.dir != "" {
		os.RemoveAll(fakes.dir)
	}
	os.Exit(code)
}

// buildFake compiles fakeMain for linux/goarch without cgo, which links it
// statically; each architecture is built once per test binary.
func buildFake(t *testing.T, goarch string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	fakes.Lock()
	defer fakes.Unlock()
	if p, ok := fakes.bins[goarch]; ok {
		return p
	}
	if fakes.dir == "" {
		dir, err := os.MkdirTemp("", "sluice-image-fake")
		if err != nil {
			t.Fatal(err)
		}
		fakes.dir, fakes.bins = dir, map[string]string{}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(fakeMain), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module fake\n\ngo 1.22\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(fakes.dir, "fake-"+goarch)
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", out, ".")
	cmd.Dir = fakes.dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the fake binary for %s: %v\n%s", goarch, err, b)
	}
	fakes.bins[goarch] = out
	return out
}

// fakeBinaries lays out stand-ins for every default platform as -binaries
// expects them: dir/<os>_<arch>/{sluice,sluice-worker}.
func fakeBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range strings.Split(DefaultPlatforms, ",") {
		plat, _ := v1.ParsePlatform(p)
		fake := buildFake(t, plat.Architecture)
		data, err := os.ReadFile(fake)
		if err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(dir, plat.OS+"_"+plat.Architecture)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, bin := range []string{"sluice", "sluice-worker"} {
			if err := os.WriteFile(filepath.Join(sub, bin), data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

var fakeCreated = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// fakeImage builds the image index from stand-ins into a layout and a tarball.
func fakeImage(t *testing.T) (builds []Options, layoutDir, tarPath string) {
	t.Helper()
	opts := Options{CABundle: writeCA(t), Created: fakeCreated, Source: "https://example.test/sluice"}
	builds, err := PlatformBuilds(opts, fakeBinaries(t), DefaultPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	layoutDir, tarPath = filepath.Join(out, "layout"), filepath.Join(out, "image.tar")
	if err := run(builds, layoutDir, tarPath, HostPlatform(), "sluice:test"); err != nil {
		t.Fatal(err)
	}
	return builds, layoutDir, tarPath
}

// TestImageFromFakeBinaries runs the whole assembly on small stand-in
// binaries for every default platform: the layout holds an index with one
// manifest per platform, each checked; the tarball holds the host's image;
// two builds are identical; and each platform's unpacked binaries are checked,
// the host's run as the image's user.
func TestImageFromFakeBinaries(t *testing.T) {
	builds, layoutDir, tarPath := fakeImage(t)
	idx := readIndex(t, layoutDir)
	imgs := checkIndex(t, idx, DefaultPlatforms)
	host, ok := imgs[HostPlatform()]
	if !ok {
		t.Skipf("the host's platform %s is not among %s", HostPlatform(), DefaultPlatforms)
	}
	fromTar, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatalf("read the tarball back: %v", err)
	}
	d1, _ := host.ConfigName()
	d2, _ := fromTar.ConfigName()
	if d1 != d2 {
		t.Fatalf("the tarball does not hold the host's (%s) image: configs %s, %s", HostPlatform(), d1, d2)
	}
	// The same inputs make the same index.
	again, _, _, err := BuildIndex(builds)
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := idx.Digest()
	m2, _ := again.Digest()
	if m1 != m2 {
		t.Fatalf("two builds of the same inputs differ: %s, %s", m1, m2)
	}
	im, _ := idx.IndexManifest()
	if im.Annotations["org.opencontainers.image.source"] != "https://example.test/sluice" || im.Annotations["org.opencontainers.image.created"] != "2024-05-06T07:08:09Z" {
		t.Errorf("index annotations %v", im.Annotations)
	}
	for plat, img := range imgs {
		cf := checkConfig(t, img)
		if !cf.Created.Time.Equal(fakeCreated) || cf.Config.Labels["org.opencontainers.image.source"] != "https://example.test/sluice" {
			t.Fatalf("%s: created %v, labels %v", plat, cf.Created, cf.Config.Labels)
		}
		root := unpack(t, img)
		checkBinaries(t, root, cf)
		for _, bin := range []string{"sluice", "sluice-worker"} {
			got, ok := runOn(t, plat, root, bin, "version")
			if !ok {
				t.Logf("%s: not run (no qemu-user for it here)", plat)
				break
			}
			if want := bin + " [version] uid="; !strings.HasPrefix(got, want) {
				t.Fatalf("%s: %s printed %q, want %q…", plat, bin, got, want)
			}
		}
	}
}

// TestPushToRegistry pushes the stand-ins' index to an in-process registry
// on loopback that demands the credentials a docker config names, pulls it
// back, and runs the host's binaries from the pulled image.
func TestPushToRegistry(t *testing.T) {
	_, layoutDir, _ := fakeImage(t)
	ref, authed := registryWithDockerConfig(t)
	if _, err := Push(layoutDir, ref); err == nil {
		t.Fatal("a push without credentials was accepted")
	}
	if _, err := Push(layoutDir, ref, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		t.Fatal(err)
	}
	if authed.Load() == 0 {
		t.Fatal("the registry saw no request with the docker config's credentials")
	}
	imgs := checkPushed(t, layoutDir, ref, DefaultPlatforms)
	if img, ok := imgs[HostPlatform()]; ok {
		root := unpack(t, img)
		if got := runAsImageUser(t, root, "sluice", "version"); !strings.HasPrefix(got, "sluice [version] uid=") {
			t.Fatalf("sluice from the pulled image printed %q", got)
		}
	}
}

// TestBuiltImage checks the image `make image` built (SLUICE_IMAGE names its
// layout, SLUICE_IMAGE_PLATFORMS its platforms): one manifest per platform,
// each with the real binaries for its platform, and the host's, unpacked,
// print their version and commit. `make image-test` runs it; building the
// image takes minutes, so `make test` does not.
func TestBuiltImage(t *testing.T) {
	dir, platforms := builtImage(t)
	imgs := checkIndex(t, readIndex(t, dir), platforms)
	for plat, img := range imgs {
		t.Run(strings.ReplaceAll(plat, "/", "_"), func(t *testing.T) {
			checkBuilt(t, img, plat)
		})
	}
	if _, ok := imgs[HostPlatform()]; !ok {
		t.Errorf("the image holds no %s image: no binary could be run here", HostPlatform())
	}
}

// TestBuiltImagePush pushes the image `make image` built to an in-process
// registry on loopback (credentials from a docker config), pulls the index
// back, checks every platform's manifest and digest against the layout, and
// runs the host's binaries from the pulled image. `make image-test` runs it.
func TestBuiltImagePush(t *testing.T) {
	dir, platforms := builtImage(t)
	ref, _ := registryWithDockerConfig(t)
	d, err := Push(dir, ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s@%s", ref, d)
	imgs := checkPushed(t, dir, ref, platforms)
	img, ok := imgs[HostPlatform()]
	if !ok {
		t.Fatalf("the pulled index holds no %s image", HostPlatform())
	}
	checkBuilt(t, img, HostPlatform())
}

func builtImage(t *testing.T) (dir, platforms string) {
	dir = os.Getenv("SLUICE_IMAGE")
	if dir == "" {
		t.Skip("SLUICE_IMAGE is not set: make image-test builds the image and runs this test")
	}
	platforms = os.Getenv("SLUICE_IMAGE_PLATFORMS")
	if strings.TrimSpace(platforms) == "" {
		platforms = DefaultPlatforms
	}
	return dir, platforms
}

// checkBuilt checks the platform's image of the real binaries: labels, the
// binaries' platform and commit, and both binaries' version commands run from
// the unpacked image (the host's directly, another platform's through
// qemu-user when it is installed).
func checkBuilt(t *testing.T, img v1.Image, platform string) {
	t.Helper()
	cf := checkConfig(t, img)
	version, revision := cf.Config.Labels["org.opencontainers.image.version"], cf.Config.Labels["org.opencontainers.image.revision"]
	if version == "" || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(revision) {
		t.Fatalf("labels name version %q, revision %q; make image builds with -buildvcs=true from a git checkout", version, revision)
	}
	root := unpack(t, img)
	for _, bin := range []string{"sluice", "sluice-worker"} {
		if rev := checkBinaries(t, root, cf)[bin]; rev != revision {
			t.Errorf("%s records commit %q, the label %q", bin, rev, revision)
		}
	}
	if size := fileSize(t, filepath.Join(root, "usr/local/bin/sluice-worker")); size < 10<<20 {
		t.Fatalf("sluice-worker is %d bytes: not the real binary", size)
	}
	for _, args := range [][]string{{"sluice", "version"}, {"sluice", "--version"}, {"sluice-worker", "version"}, {"sluice-worker", "--version"}} {
		got, ok := runOn(t, platform, root, args[0], args[1])
		if !ok {
			t.Logf("%s: binaries not run (no qemu-user for it here); platform, static linking and commit checked from the ELF and build information", platform)
			return
		}
		for _, want := range []string{args[0] + " " + version + " (commit " + revision[:12], "commit:      " + revision + "\n", "cgo:         1\n", "platform:    " + cf.OS + "/" + cf.Architecture + "\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s %s printed no %q:\n%s", args[0], args[1], want, got)
			}
		}
	}
}

// checkBinaries checks that the unpacked binaries are static executables for
// the image's platform and returns the commit each records.
func checkBinaries(t *testing.T, root string, cf *v1.ConfigFile) map[string]string {
	t.Helper()
	revs := map[string]string{}
	for _, bin := range []string{"sluice", "sluice-worker"} {
		p := filepath.Join(root, "usr/local/bin", bin)
		_, bi, err := readStatic(p)
		if err != nil {
			t.Fatalf("%s/%s: %v", cf.OS, cf.Architecture, err)
		}
		if err := checkPlatform(p, bi, cf.OS+"/"+cf.Architecture); err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if m, ok := elfMachine[cf.Architecture]; !ok || f.Machine != m {
			t.Fatalf("%s in the %s/%s image is %s code", bin, cf.OS, cf.Architecture, f.Machine)
		}
		revs[bin] = setting(bi, "vcs.revision")
	}
	return revs
}

// readIndex reads the image index a layout holds.
func readIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	idx, img, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if img != nil {
		t.Fatalf("layout %s holds a single image, not an image index", dir)
	}
	return idx
}

// checkIndex checks that idx is an OCI image index with exactly one manifest
// per platform in platforms, each descriptor's platform the image's config's,
// and returns the images by os/arch.
func checkIndex(t *testing.T, idx v1.ImageIndex, platforms string) map[string]v1.Image {
	t.Helper()
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Fatalf("index media type %s", mt)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	imgs := map[string]v1.Image{}
	for _, d := range m.Manifests {
		if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil || d.ArtifactType != "" {
			t.Fatalf("index entry %s: media type %s, platform %v, artifact type %q (want an image manifest, a platform, no artifact type)", d.Digest, d.MediaType, d.Platform, d.ArtifactType)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := (v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}); !got.Equals(*d.Platform) {
			t.Errorf("descriptor says %s, the config %s", d.Platform, got)
		}
		if want := map[string]string{"arm64": "v8"}[d.Platform.Architecture]; d.Platform.Variant != want {
			t.Errorf("%s: variant %q, want %q", d.Platform, d.Platform.Variant, want)
		}
		key := d.Platform.OS + "/" + d.Platform.Architecture
		if _, dup := imgs[key]; dup {
			t.Fatalf("two manifests for %s", key)
		}
		imgs[key] = img
	}
	var want []string
	for _, p := range strings.FieldsFunc(platforms, func(r rune) bool { return r == ',' || r == ' ' }) {
		plat, _ := v1.ParsePlatform(p)
		want = append(want, plat.OS+"/"+plat.Architecture)
		if _, ok := imgs[want[len(want)-1]]; !ok {
			t.Errorf("the index holds no %s manifest", p)
		}
	}
	if len(imgs) != len(want) {
		t.Errorf("the index holds %d manifests (%s), want %s", len(imgs), platformList(m), want)
	}
	return imgs
}

// registryWithDockerConfig starts go-containerregistry's registry on
// loopback behind basic authentication, and points the default keychain at a
// docker config holding its credentials. It returns a tag in it and the
// number of requests that carried the credentials.
func registryWithDockerConfig(t *testing.T) (name.Tag, *atomic.Int64) {
	t.Helper()
	const user, pass = "sluice-test", "not-a-real-secret"
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var authed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="sluice-test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"credentials required"}]}`, http.StatusUnauthorized)
			return
		}
		authed.Add(1)
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	cfgDir := t.TempDir()
	cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host, base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", t.TempDir()) // no ~/.docker/config.json of the machine's
	t.Setenv("DOCKER_CONFIG", cfgDir)
	ref, err := name.NewTag(host + "/sluice/sluice:test")
	if err != nil {
		t.Fatal(err)
	}
	return ref, &authed
}

// checkPushed pulls ref's index back and checks it against the layout:
// the same index digest, the same manifests for the same platforms, each
// pulled image with the layout's digest and layers. It returns the pulled
// images by os/arch.
func checkPushed(t *testing.T, layoutDir string, ref name.Tag, platforms string) map[string]v1.Image {
	t.Helper()
	local := readIndex(t, layoutDir)
	pulled, err := remote.Index(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	ld, _ := local.Digest()
	pd, err := pulled.Digest()
	if err != nil || pd != ld {
		t.Fatalf("pulled index %s (%v), the layout's %s", pd, err, ld)
	}
	lm, _ := local.IndexManifest()
	pm, err := pulled.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(pm.Manifests) != len(lm.Manifests) {
		t.Fatalf("pulled %d manifests, the layout holds %d", len(pm.Manifests), len(lm.Manifests))
	}
	for i, d := range pm.Manifests {
		if d.Digest != lm.Manifests[i].Digest || !d.Platform.Equals(*lm.Manifests[i].Platform) {
			t.Fatalf("pulled manifest %d is %s for %s, the layout's %s for %s", i, d.Digest, d.Platform, lm.Manifests[i].Digest, lm.Manifests[i].Platform)
		}
		// Fetch each manifest by digest, as a runtime on that platform would.
		img, err := remote.Image(ref.Context().Digest(d.Digest.String()), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			t.Fatalf("pull %s: %v", d.Digest, err)
		}
		if got, _ := img.Digest(); got != d.Digest {
			t.Fatalf("pulled %s by digest, got %s", d.Digest, got)
		}
		limg, _ := local.Image(d.Digest)
		ll, _ := limg.Layers()
		pl, err := img.Layers()
		if err != nil || len(pl) != len(ll) {
			t.Fatalf("%s: pulled %d layers (%v), the layout's %d", d.Platform, len(pl), err, len(ll))
		}
		for j := range pl {
			a, _ := pl[j].Digest()
			b, _ := ll[j].Digest()
			if a != b {
				t.Fatalf("%s layer %d: pulled %s, the layout's %s", d.Platform, j, a, b)
			}
		}
	}
	return checkIndex(t, pulled, platforms)
}

func TestPlatformChecks(t *testing.T) {
	fake := buildFake(t, "amd64")
	ca := writeCA(t)
	if _, _, err := Build(Options{Sluice: fake, Worker: fake, Platform: "linux/arm64", CABundle: ca}); err == nil || !strings.Contains(err.Error(), "is built for linux/amd64, not linux/arm64") {
		t.Errorf("an amd64 binary as linux/arm64: %v", err)
	}
	if _, _, err := Build(Options{Sluice: fake, Worker: fake, Platform: "linux/amd64", CABundle: ca}); err != nil {
		t.Errorf("an amd64 binary as linux/amd64: %v", err)
	}
	same := Options{Sluice: fake, Worker: fake, CABundle: ca}
	if _, _, _, err := BuildIndex([]Options{same, same}); err == nil || !strings.Contains(err.Error(), "are both for linux/amd64") {
		t.Errorf("two images for one platform: %v", err)
	}
	for _, bad := range []string{"", "linux", "linux/amd64:10", "a/b/c/d"} {
		if _, err := PlatformBuilds(Options{}, "bin", bad); err == nil {
			t.Errorf("platforms %q accepted", bad)
		}
	}
	b, err := PlatformBuilds(Options{}, "bin", "linux/amd64 linux/arm64/v8")
	if err != nil || len(b) != 2 || b[1].Sluice != filepath.Join("bin", "linux_arm64", "sluice") || b[1].Platform != "linux/arm64/v8" {
		t.Errorf("PlatformBuilds: %+v, %v", b, err)
	}
}

func TestBuildRefusesDynamicBinary(t *testing.T) {
	dyn := ""
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if _, err := os.Stat(p); err == nil {
			dyn = p
			break
		}
	}
	if dyn == "" {
		t.Skip("no /bin/true to stand in for a dynamic binary")
	}
	_, _, err := readStatic(dyn)
	if err == nil {
		t.Skipf("%s is statically linked here", dyn)
	}
	if !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("readStatic(%s) = %v", dyn, err)
	}
}

func TestTagSafeAndCreatedFrom(t *testing.T) {
	for in, want := range map[string]string{"(devel)": "devel", "v1.2.3": "v1.2.3", "v0.0.0-2024+dirty": "v0.0.0-2024-dirty", "": "devel"} {
		if got := tagSafe(in); got != want {
			t.Errorf("tagSafe(%q) = %q, want %q", in, got, want)
		}
		if _, err := name.NewTag("sluice:" + tagSafe(in)); err != nil {
			t.Errorf("tag from %q: %v", in, err)
		}
	}
	if got := CreatedFrom("1700000000", "2020-01-01T00:00:00Z"); got.Unix() != 1700000000 {
		t.Errorf("SOURCE_DATE_EPOCH ignored: %v", got)
	}
	if got := CreatedFrom("", "2020-01-01T00:00:00Z"); got.Year() != 2020 {
		t.Errorf("commit time ignored: %v", got)
	}
	if got := CreatedFrom("", ""); got.Unix() != 0 {
		t.Errorf("default %v, want the epoch", got)
	}
}

func writeCA(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkConfig checks what every image must say: the non-root user, the
// worker as entrypoint, the admin port, and one layer.
func checkConfig(t *testing.T, img v1.Image) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/sluice-worker" || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts["9464/tcp"]; !ok {
		t.Errorf("exposed ports %v lack 9464/tcp", c.ExposedPorts)
	}
	if !contains(c.Env, "PATH=/usr/local/bin") || c.WorkingDir != "/home/nonroot" {
		t.Errorf("env %q, workdir %q", c.Env, c.WorkingDir)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s", mt)
	}
	return cf
}

// unpack writes the image's filesystem into a directory others can enter,
// checking each entry's owner and mode on the way.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	for p := root; p != filepath.Dir(p) && strings.HasPrefix(p, os.TempDir()) && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755) // the image's user must reach the binaries
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := map[string]bool{"usr/local/bin/sluice": false, "usr/local/bin/sluice-worker": false,
		"etc/passwd": false, "etc/group": false, "etc/ssl/certs/ca-certificates.crt": false, "tmp": false, "home/nonroot": false}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := want[h.Name]; ok {
			want[h.Name] = true
		}
		if h.Mode&(04000|02000) != 0 {
			t.Errorf("%s is setuid or setgid", h.Name)
		}
		switch h.Name {
		case "home/nonroot":
			if h.Uid != 65532 || h.Gid != 65532 {
				t.Errorf("home/nonroot owned by %d:%d", h.Uid, h.Gid)
			}
		case "tmp":
			if h.Mode&0o1777 != 0o1777 {
				t.Errorf("tmp mode %o", h.Mode)
			}
		default:
			if h.Uid != 0 || h.Mode&0o022 != 0 {
				t.Errorf("%s: owner %d, mode %o (want root-owned, not group or world writable)", h.Name, h.Uid, h.Mode)
			}
		}
		dst := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(h.Name, "/")))
		if !strings.HasPrefix(dst, root+string(filepath.Separator)) {
			t.Fatalf("entry %q leaves the root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			var b bytes.Buffer
			if _, err := io.Copy(&b, tr); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b.Bytes(), os.FileMode(h.Mode)&0o755); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("unexpected entry %s of type %c", h.Name, h.Typeflag)
		}
	}
	for n, seen := range want {
		if !seen {
			t.Errorf("image lacks %s", n)
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "\nnonroot:x:65532:65532:") {
		t.Errorf("etc/passwd names no nonroot user 65532:\n%s", passwd)
	}
	return root
}

// runAsImageUser runs an unpacked binary as uid 65532 when the test runs as
// root (as the image would run it), else as the test's own user.
func runAsImageUser(t *testing.T, root, bin string, args ...string) string {
	t.Helper()
	return runWith(t, nil, root, bin, args...)
}

// emulator returns the command that runs a linux binary of another
// architecture here (Debian's qemu-user-static or qemu-user), or nil.
func emulator(arch string) []string {
	q := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
	if q == "" {
		return nil
	}
	for _, name := range []string{"qemu-" + q + "-static", "qemu-" + q} {
		if p, err := exec.LookPath(name); err == nil {
			return []string{p}
		}
	}
	return nil
}

// runOn runs an unpacked binary of the image for platform os/arch: directly
// for the host's platform, through an emulator for another when one is
// installed. ok is false when it could not be run here.
func runOn(t *testing.T, platform, root, bin string, args ...string) (out string, ok bool) {
	t.Helper()
	if platform == HostPlatform() {
		return runWith(t, nil, root, bin, args...), true
	}
	plat, _ := v1.ParsePlatform(platform)
	emu := emulator(plat.Architecture)
	if plat.OS != "linux" || emu == nil {
		return "", false
	}
	return runWith(t, emu, root, bin, args...), true
}

func runWith(t *testing.T, prefix []string, root, bin string, args ...string) string {
	t.Helper()
	argv := append(append(append([]string{}, prefix...), filepath.Join(root, "usr/local/bin", bin)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/bin", "HOME=/home/nonroot"}
	cmd.Dir = root
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.String())
	}
	return stdout.String()
}

func fileSize(t *testing.T, p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
