// Command image assembles sluice's container image without a container
// daemon: the two static binaries, a CA bundle, /etc/passwd and /etc/group
// naming the non-root user 65532, and /tmp, in one layer on an empty (scratch)
// base. It writes an OCI image layout and a `docker load`-able tarball.
//
//	go run ./deploy/image -sluice bin/image/sluice -worker bin/image/sluice-worker \
//	    -layout bin/sluice-image -tar bin/sluice-image.tar
//
// `make image` builds the binaries (cgo, linked statically) and runs it; see
// docs/deploy.md.
package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
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

// Options say where the image's parts come from.
type Options struct {
	Sluice, Worker string    // the two binaries; both must be statically linked
	CABundle       string    // PEM bundle copied to /etc/ssl/certs/ca-certificates.crt
	Created        time.Time // the image's creation time and every file's mtime; zero: CreatedFrom the commit time
	Source         string    // org.opencontainers.image.source label; optional
}

func main() {
	var o Options
	var layoutDir, tarPath, tag string
	flag.StringVar(&o.Sluice, "sluice", "bin/image/sluice", "the statically linked sluice binary")
	flag.StringVar(&o.Worker, "worker", "bin/image/sluice-worker", "the statically linked sluice-worker binary")
	flag.StringVar(&o.CABundle, "ca", caPath, "PEM CA bundle the image trusts (Debian's ca-certificates)")
	flag.StringVar(&o.Source, "source", "https://github.com/sluicehq/sluice", "org.opencontainers.image.source label")
	flag.StringVar(&layoutDir, "layout", "bin/sluice-image", "directory to write the OCI image layout to (replaced)")
	flag.StringVar(&tarPath, "tar", "bin/sluice-image.tar", "file to write a docker-load tarball to; empty skips it")
	flag.StringVar(&tag, "tag", "", "image reference recorded in the layout and tarball (default sluice:<version>)")
	flag.Parse()
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		o.Created = CreatedFrom(e, "")
	}
	if err := run(o, layoutDir, tarPath, tag); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(o Options, layoutDir, tarPath, tag string) error {
	img, version, err := Build(o)
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
	if err := WriteLayout(layoutDir, img, ref); err != nil {
		return err
	}
	if tarPath != "" {
		if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
			return fmt.Errorf("write %s: %w", tarPath, err)
		}
	}
	d, _ := img.Digest()
	fmt.Printf("image %s %s\n  layout %s\n", ref, d, layoutDir)
	if tarPath != "" {
		fmt.Printf("  tarball %s\n", tarPath)
	}
	return nil
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

// WriteLayout replaces dir with an OCI image layout holding img under ref.
func WriteLayout(dir string, img v1.Image, ref name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", dir, err)
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          ref.Name(),
	}))
}

// Build assembles the image and returns it with the version the sluice
// binary reports.
func Build(o Options) (v1.Image, string, error) {
	var files []file
	var info *buildinfo.BuildInfo
	for _, b := range []struct{ src, name string }{{o.Sluice, "sluice"}, {o.Worker, "sluice-worker"}} {
		data, bi, err := readStatic(b.src)
		if err != nil {
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
	cf.Architecture, cf.OS = setting(info, "GOARCH"), setting(info, "GOOS")
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
	return data, bi, nil
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
