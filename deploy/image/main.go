// Command image assembles sluice's container image without a container
// daemon: for each platform, the two static binaries, a CA bundle, /etc/passwd
// and /etc/group naming the non-root user 65532, and /tmp, in one layer on an
// empty (scratch) base; the platforms' images go into one OCI image index. It
// writes an OCI image layout holding that index and a `docker load`-able
// tarball of the build host's platform, and pushes a layout to a registry.
//
//	go run ./deploy/image -binaries bin/image -platforms linux/amd64,linux/arm64 \
//	    -layout bin/sluice-image -tar bin/sluice-image.tar
//	go run ./deploy/image push -layout bin/sluice-image registry.example.com/sluice:TAG
//
// -binaries names a directory with one subdirectory per platform, named
// <os>_<arch> (linux_amd64, linux_arm64), each holding sluice and
// sluice-worker. `make image` builds them (deploy/image/build.sh: cgo, linked
// statically, cross-compiled for the platforms other than the host's) and runs
// this; `make image-push IMAGE=…` pushes. See docs/deploy.md.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which the tests and the Kubernetes manifests rely on.
const (
	UID        = 65532
	UserName   = "nonroot"
	BinDir     = "/usr/local/bin"
	HomeDir    = "/home/nonroot"
	AdminPort  = "9464/tcp"
	Entrypoint = BinDir + "/sluice-worker"
	caPath     = "/etc/ssl/certs/ca-certificates.crt"
)

// DefaultPlatforms are the platforms `make image` builds.
const DefaultPlatforms = "linux/amd64,linux/arm64"

// Options say where one platform's image's parts come from.
type Options struct {
	Sluice, Worker string    // the two binaries; both must be statically linked
	Platform       string    // os/arch[/variant] the binaries must be built for; empty: whatever they are
	CABundle       string    // PEM bundle copied to /etc/ssl/certs/ca-certificates.crt
	Created        time.Time // the image's creation time and every file's mtime; zero: CreatedFrom the commit time
	Source         string    // org.opencontainers.image.source label; optional
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "push" {
		if err := pushMain(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "image push: %v\n", err)
			os.Exit(1)
		}
		return
	}
	var o Options
	var binaries, platforms, layoutDir, tarPath, tarPlatform, tag string
	flag.StringVar(&binaries, "binaries", "bin/image", "directory with one <os>_<arch> subdirectory per platform, each holding the statically linked sluice and sluice-worker")
	flag.StringVar(&platforms, "platforms", DefaultPlatforms, "platforms to put in the image index, separated by commas or spaces")
	flag.StringVar(&o.CABundle, "ca", caPath, "PEM CA bundle the image trusts (Debian's ca-certificates)")
	flag.StringVar(&o.Source, "source", "https://github.com/sluicehq/sluice", "org.opencontainers.image.source label")
	flag.StringVar(&layoutDir, "layout", "bin/sluice-image", "directory to write the OCI image layout to (replaced)")
	flag.StringVar(&tarPath, "tar", "bin/sluice-image.tar", "file to write a docker-load tarball of one platform's image to; empty skips it")
	flag.StringVar(&tarPlatform, "tar-platform", HostPlatform(), "the platform whose image the tarball holds")
	flag.StringVar(&tag, "tag", "", "image reference recorded in the layout and tarball (default sluice:<version>)")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected arguments %q (the push subcommand comes first: image push -layout DIR REF)\n", flag.Args())
		os.Exit(2)
	}
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		o.Created = CreatedFrom(e, "")
	}
	builds, err := PlatformBuilds(o, binaries, platforms)
	if err == nil {
		err = run(builds, layoutDir, tarPath, tarPlatform, tag)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

// HostPlatform is the platform this program runs on, as os/arch.
func HostPlatform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// PlatformBuilds expands o into one Options per platform, with the binaries
// from dir/<os>_<arch>/.
func PlatformBuilds(o Options, dir, platforms string) ([]Options, error) {
	var builds []Options
	for _, p := range strings.FieldsFunc(platforms, func(r rune) bool { return r == ',' || r == ' ' }) {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS == "" || plat.Architecture == "" || plat.OSVersion != "" {
			return nil, fmt.Errorf("platform %q: want os/arch or os/arch/variant", p)
		}
		sub := filepath.Join(dir, plat.OS+"_"+plat.Architecture)
		b := o
		b.Platform, b.Sluice, b.Worker = plat.String(), filepath.Join(sub, "sluice"), filepath.Join(sub, "sluice-worker")
		builds = append(builds, b)
	}
	if len(builds) == 0 {
		return nil, errors.New("no platforms")
	}
	return builds, nil
}

func run(builds []Options, layoutDir, tarPath, tarPlatform, tag string) error {
	idx, imgs, version, err := BuildIndex(builds)
	if err != nil {
		return err
	}
	if tag == "" {
		tag = "sluice:" + tagSafe(version)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", tag, err)
	}
	if err := WriteLayout(layoutDir, idx, ref); err != nil {
		return err
	}
	d, _ := idx.Digest()
	fmt.Printf("image index %s %s\n", ref, d)
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range m.Manifests {
		fmt.Printf("  %-16s %s\n", desc.Platform, desc.Digest)
	}
	fmt.Printf("  layout %s\n", layoutDir)
	if tarPath != "" {
		want, err := v1.ParsePlatform(tarPlatform)
		if err != nil {
			return fmt.Errorf("-tar-platform %q: %w", tarPlatform, err)
		}
		var img v1.Image
		for i, desc := range m.Manifests {
			if desc.Platform.Satisfies(*want) {
				img = imgs[i]
				break
			}
		}
		if img == nil {
			return fmt.Errorf("-tar-platform %s is not among the platforms built (%s); pass -tar '' to write no tarball", tarPlatform, platformList(m))
		}
		if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
			return fmt.Errorf("write %s: %w", tarPath, err)
		}
		fmt.Printf("  tarball %s (%s)\n", tarPath, tarPlatform)
	}
	return nil
}

func platformList(m *v1.IndexManifest) string {
	var ps []string
	for _, d := range m.Manifests {
		ps = append(ps, d.Platform.String())
	}
	return strings.Join(ps, ", ")
}

// tagSafe turns a module version such as "(devel)" into a valid tag.
func tagSafe(v string) string {
	v = strings.Trim(v, "()")
	var b strings.Builder
	for _, r := range v {
		if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "devel"
	}
	return b.String()
}

// WriteLayout replaces dir with an OCI image layout whose index.json names
// one entry, the image index idx, under ref.
func WriteLayout(dir string, idx v1.ImageIndex, ref name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          ref.Name(),
	}))
}

// BuildIndex builds one image per entry of builds and puts them in an OCI
// image index, each manifest's descriptor naming its platform. All binaries
// must come from the same commit, and no platform may come twice. It returns
// the index, the images in the index's order, and the version.
func BuildIndex(builds []Options) (v1.ImageIndex, []v1.Image, string, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var imgs []v1.Image
	var version, revision string
	var created time.Time
	seen := map[string]string{}
	for i, o := range builds {
		img, v, err := Build(o)
		if err != nil {
			return nil, nil, "", err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, nil, "", err
		}
		plat := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		if prev, dup := seen[plat.String()]; dup {
			return nil, nil, "", fmt.Errorf("%s and %s are both for %s", prev, o.Sluice, plat)
		}
		seen[plat.String()] = o.Sluice
		rev := cf.Config.Labels["org.opencontainers.image.revision"]
		if i == 0 {
			version, revision, created = v, rev, cf.Created.Time
		} else if v != version || rev != revision {
			return nil, nil, "", fmt.Errorf("%s (%s %s) and %s (%s %s) come from different commits: build every platform from the same checkout",
				builds[0].Sluice, version, revision, o.Sluice, v, rev)
		}
		img = plainImage{img}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plat}})
		imgs = append(imgs, img)
	}
	ann := map[string]string{
		"org.opencontainers.image.title":   "sluice",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.created": created.Format(time.RFC3339),
	}
	if revision != "" {
		ann["org.opencontainers.image.revision"] = revision
	}
	if builds[0].Source != "" {
		ann["org.opencontainers.image.source"] = builds[0].Source
	}
	idx, ok := mutate.Annotations(idx, ann).(v1.ImageIndex)
	if !ok {
		return nil, nil, "", errors.New("annotating the index did not give an index")
	}
	return idx, imgs, version, nil
}

// plainImage is an image whose index descriptor carries no artifactType:
// go-containerregistry would set it to the config's media type, but the OCI
// image index specification reserves it for artifacts, and sluice's image is
// a plain runnable image.
type plainImage struct{ v1.Image }

func (plainImage) ArtifactType() (string, error) { return "", nil }

// ReadLayout reads the one entry of the OCI image layout in dir: an image
// index (what this program writes) or a single image.
func ReadLayout(dir string) (v1.ImageIndex, v1.Image, error) {
	l, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read layout %s: %w (make image writes it)", dir, err)
	}
	m, err := l.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, nil, fmt.Errorf("layout %s holds %d entries, want 1", dir, len(m.Manifests))
	}
	d := m.Manifests[0]
	switch {
	case d.MediaType.IsIndex():
		idx, err := l.ImageIndex(d.Digest)
		return idx, nil, err
	case d.MediaType.IsImage():
		img, err := l.Image(d.Digest)
		return nil, img, err
	}
	return nil, nil, fmt.Errorf("layout %s holds a %s, neither an image nor an index", dir, d.MediaType)
}

// Push copies the layout in dir to the registry as ref and returns the
// pushed manifest's digest. Credentials come from opts; pushMain passes the
// default keychain (the docker or podman config and its credential helpers).
func Push(dir string, ref name.Tag, opts ...remote.Option) (v1.Hash, error) {
	idx, img, err := ReadLayout(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	if idx != nil {
		if err := remote.WriteIndex(ref, idx, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
		}
		return idx.Digest()
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return img.Digest()
}

func pushMain(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	layoutDir := fs.String("layout", "bin/sluice-image", "the OCI image layout to push (make image writes it)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: image push [-layout DIR] REGISTRY/REPOSITORY:TAG\n"+
			"Credentials come from the docker config ($DOCKER_CONFIG or ~/.docker/config.json, with its\n"+
			"credential helpers) or podman's auth.json ($REGISTRY_AUTH_FILE); log in with docker login,\n"+
			"podman login or crane auth login first. No flag takes a secret.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want exactly one image reference")
	}
	ref, err := name.NewTag(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("image reference %q: %w", fs.Arg(0), err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	d, err := Push(*layoutDir, ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("sluice-image-push"))
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s\n  %s@%s\n", ref, ref.Context(), d)
	return nil
}

// Build assembles one platform's image and returns it with the version the sluice
// binary reports.
func Build(o Options) (v1.Image, string, error) {
	var files []file
	var info *buildinfo.BuildInfo
	for _, b := range []struct{ src, name string }{{o.Sluice, "sluice"}, {o.Worker, "sluice-worker"}} {
		data, bi, err := readStatic(b.src)
		if err != nil {
			return nil, "", err
		}
		if err := checkPlatform(b.src, bi, o.Platform); err != nil {
			return nil, "", err
		}
		if info == nil {
			info = bi
		} else if bi.Main.Version != info.Main.Version || setting(bi, "vcs.revision") != setting(info, "vcs.revision") {
			return nil, "", fmt.Errorf("%s (%s %s) and %s (%s %s) come from different builds: build both in one go build",
				o.Sluice, info.Main.Version, setting(info, "vcs.revision"), b.src, bi.Main.Version, setting(bi, "vcs.revision"))
		}
		files = append(files, file{path: BinDir + "/" + b.name, mode: 0o755, data: data})
	}
	if o.Created.IsZero() {
		o.Created = CreatedFrom("", setting(info, "vcs.time"))
	}
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, "", fmt.Errorf("CA bundle: %w (install Debian's ca-certificates or pass -ca)", err)
	}
	if !bytes.Contains(ca, []byte("BEGIN CERTIFICATE")) {
		return nil, "", fmt.Errorf("CA bundle %s holds no PEM certificate", o.CABundle)
	}
	files = append(files,
		file{path: caPath, mode: 0o644, data: ca},
		file{path: "/etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", UserName, UID, UID, UserName, HomeDir))},
		file{path: "/etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, UID))},
		file{path: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		file{path: "/tmp", dir: true, mode: 0o1777},
		file{path: HomeDir, dir: true, mode: 0o700, uid: UID},
	)
	layerTar, err := tarFiles(files, o.Created)
	if err != nil {
		return nil, "", err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, "", err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "deploy/image: sluice, sluice-worker, CA bundle, passwd", Comment: "sluice"}})
	if err != nil {
		return nil, "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, "", err
	}
	cf = cf.DeepCopy()
	version, revision := info.Main.Version, setting(info, "vcs.revision")
	if version == "" {
		version = "(devel)"
	}
	cf.OS, cf.Architecture, cf.Variant = setting(info, "GOOS"), setting(info, "GOARCH"), variant(info)
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, UID),
		Entrypoint:   []string{Entrypoint},
		Env:          []string{"PATH=" + BinDir, "HOME=" + HomeDir},
		WorkingDir:   HomeDir,
		ExposedPorts: map[string]struct{}{AdminPort: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "sluice",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": revision,
			"org.opencontainers.image.source":   o.Source,
		},
	}
	if revision == "" {
		delete(cf.Config.Labels, "org.opencontainers.image.revision")
	}
	if o.Source == "" {
		delete(cf.Config.Labels, "org.opencontainers.image.source")
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, "", err
	}
	return img, version, nil
}

// readStatic reads a Go binary and refuses one that needs a dynamic loader:
// the image has no libc.
func readStatic(p string) ([]byte, *buildinfo.BuildInfo, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not an ELF executable: %w", p, err)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, nil, fmt.Errorf("%s is dynamically linked (it asks for a program interpreter); the image has no libc: build it with -ldflags '-linkmode external -extldflags -static' (make image does)", p)
		}
	}
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("%s carries no Go build information: %w", p, err)
	}
	if m, ok := elfMachine[setting(bi, "GOARCH")]; ok && f.Machine != m {
		return nil, nil, fmt.Errorf("%s says it was built for GOARCH=%s but is %s code", p, setting(bi, "GOARCH"), f.Machine)
	}
	return data, bi, nil
}

// elfMachine is the ELF machine of each GOARCH the image may be built for.
var elfMachine = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "386": elf.EM_386, "arm": elf.EM_ARM,
	"riscv64": elf.EM_RISCV, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390,
}

// variant is the OCI platform variant of a binary: v8 for arm64 (as the OCI
// image index specification lists it), v5–v7 for 32-bit arm from GOARM, none
// for the others.
func variant(bi *buildinfo.BuildInfo) string {
	switch setting(bi, "GOARCH") {
	case "arm64":
		return "v8"
	case "arm":
		if v := setting(bi, "GOARM"); v != "" {
			return "v" + strings.SplitN(v, ",", 2)[0]
		}
	}
	return ""
}

// checkPlatform refuses a binary built for another platform than want
// (os/arch[/variant]; empty accepts any).
func checkPlatform(p string, bi *buildinfo.BuildInfo, want string) error {
	if want == "" {
		return nil
	}
	w, err := v1.ParsePlatform(want)
	if err != nil {
		return err
	}
	got := v1.Platform{OS: setting(bi, "GOOS"), Architecture: setting(bi, "GOARCH"), Variant: variant(bi)}
	if !got.Satisfies(*w) {
		return fmt.Errorf("%s is built for %s, not %s", p, got, want)
	}
	return nil
}

func setting(bi *buildinfo.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

type file struct {
	path string
	dir  bool
	mode int64
	uid  int
	data []byte
}

// tarFiles writes files, with their parent directories, as a tar stream;
// everything is owned by root except what says otherwise, and has mtime t.
func tarFiles(files []file, t time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if dir == "/" || dir == "." || seen[dir] {
			return nil
		}
		if err := mkdirs(path.Dir(dir)); err != nil {
			return err
		}
		seen[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: 0o755, ModTime: t, Format: tar.FormatPAX})
	}
	for _, f := range files {
		if err := mkdirs(path.Dir(f.path)); err != nil {
			return nil, err
		}
		h := &tar.Header{Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, ModTime: t, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX}
		if f.uid != 0 {
			h.Uname, h.Gname = UserName, UserName
		}
		if f.dir {
			if seen[f.path] {
				return nil, errors.New("directory " + f.path + " listed after its contents")
			}
			seen[f.path] = true
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CreatedFrom picks the image's time: SOURCE_DATE_EPOCH when set, else the
// commit time the binary records, else the Unix epoch, so that the same
// binaries make the same image.
func CreatedFrom(sourceDateEpoch, vcsTime string) time.Time {
	if s, err := strconv.ParseInt(sourceDateEpoch, 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	if t, err := time.Parse(time.RFC3339, vcsTime); err == nil {
		return t.UTC()
	}
	return time.Unix(0, 0).UTC()
}
