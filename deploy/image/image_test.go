package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// fakeMain stands in for both binaries in the fast test: a static Go program
// that says who it is and what it was asked.
const fakeMain = `package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() { fmt.Printf("%s %v uid=%d\n", filepath.Base(os.Args[0]), os.Args[1:], os.Getuid()) }
`

// buildFake compiles fakeMain without cgo, which links it statically.
func buildFake(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(fakeMain), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module fake\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", "fake", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the fake binary: %v\n%s", err, out)
	}
	return filepath.Join(dir, "fake")
}

// TestImageFromFakeBinaries runs the whole assembly on small stand-in
// binaries: layout and tarball written, read back, config and files checked,
// and the unpacked binary run as the image's user.
func TestImageFromFakeBinaries(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	fake := buildFake(t)
	out := t.TempDir()
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	opts := Options{Sluice: fake, Worker: fake, CABundle: writeCA(t), Created: created, Source: "https://example.test/sluice"}
	layoutDir, tarPath := filepath.Join(out, "layout"), filepath.Join(out, "image.tar")
	if err := run(opts, layoutDir, tarPath, "sluice:test"); err != nil {
		t.Fatal(err)
	}
	img := readLayout(t, layoutDir)
	fromTar, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatalf("read the tarball back: %v", err)
	}
	d1, _ := img.ConfigName()
	d2, _ := fromTar.ConfigName()
	if d1 != d2 {
		t.Fatalf("layout and tarball hold different configs: %s, %s", d1, d2)
	}
	// The same inputs make the same image.
	again, _, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := img.Digest()
	m2, _ := again.Digest()
	if m1 != m2 {
		t.Fatalf("two builds of the same inputs differ: %s, %s", m1, m2)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Fatalf("manifest media type %s", mt)
	}
	cf := checkConfig(t, img)
	if !cf.Created.Time.Equal(created) || cf.Config.Labels["org.opencontainers.image.source"] != "https://example.test/sluice" {
		t.Fatalf("created %v, labels %v", cf.Created, cf.Config.Labels)
	}
	root := unpack(t, img)
	for _, bin := range []string{"sluice", "sluice-worker"} {
		got := runAsImageUser(t, root, bin, "version")
		if want := bin + " [version] uid="; !strings.HasPrefix(got, want) {
			t.Fatalf("%s printed %q, want %q…", bin, got, want)
		}
	}
}

// TestBuiltImage checks the image `make image` built (SLUICE_IMAGE names its
// layout): the real binaries, unpacked, print their version and commit.
// `make image-test` runs it; building the image takes minutes, so `make test`
// does not.
func TestBuiltImage(t *testing.T) {
	dir := os.Getenv("SLUICE_IMAGE")
	if dir == "" {
		t.Skip("SLUICE_IMAGE is not set: make image-test builds the image and runs this test")
	}
	img := readLayout(t, dir)
	cf := checkConfig(t, img)
	version, revision := cf.Config.Labels["org.opencontainers.image.version"], cf.Config.Labels["org.opencontainers.image.revision"]
	if version == "" || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(revision) {
		t.Fatalf("labels name version %q, revision %q; make image builds with -buildvcs=true from a git checkout", version, revision)
	}
	root := unpack(t, img)
	for _, args := range [][]string{{"sluice", "version"}, {"sluice", "--version"}, {"sluice-worker", "version"}, {"sluice-worker", "--version"}} {
		got := runAsImageUser(t, root, args[0], args[1])
		for _, want := range []string{args[0] + " " + version + " (commit " + revision[:12], "commit:      " + revision + "\n", "cgo:         1\n", "platform:    " + cf.OS + "/" + cf.Architecture + "\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s %s printed no %q:\n%s", args[0], args[1], want, got)
			}
		}
	}
	if size := fileSize(t, filepath.Join(root, "usr/local/bin/sluice-worker")); size < 10<<20 {
		t.Fatalf("sluice-worker is %d bytes: not the real binary", size)
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

func readLayout(t *testing.T, dir string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("read layout %s: %v", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("layout %s holds %d manifests, want 1", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
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
	cmd := exec.Command(filepath.Join(root, "usr/local/bin", bin), args...)
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
