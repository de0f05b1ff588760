package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/docker/docker/api/types"
)

// BuildProjectImage builds the project's image on a private dockerd, tagged
// ref, with the repository's Dockerfile and the build context make image
// prepares (the static binary and the CA bundle). Nothing is pulled: the
// Dockerfile starts FROM scratch. repo is the repository's root.
func BuildProjectImage(ctx context.Context, d *Dockerd, repo, ref string) error {
	dir, err := os.MkdirTemp("", "pleg-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "pleg_exporter")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/pleg_exporter")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for _, f := range []struct {
		name, src string
		mode      int64
	}{
		{"Dockerfile", filepath.Join(repo, "Dockerfile"), 0o644},
		{"pleg_exporter", bin, 0o755},
		{".build/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt", 0o644},
	} {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return err
		}
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(b))})
		tw.Write(b)
	}
	tw.Close()
	version := "test"
	resp, err := d.API.ImageBuild(ctx, &ctxTar, types.ImageBuildOptions{Tags: []string{ref}, Remove: true,
		BuildArgs: map[string]*string{"VERSION": &version}})
	if err != nil {
		return err
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(out, []byte(`"error"`)) {
		return fmt.Errorf("docker build: %s", out)
	}
	return nil
}

// CopyImage saves ref from a private dockerd and imports it into a private
// containerd's k8s.io namespace (where the CRI and the kubelet find it).
func CopyImage(ctx context.Context, d *Dockerd, c *Containerd, ref string) error {
	rc, err := d.API.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("docker save %s: %w", ref, err)
	}
	defer rc.Close()
	imp := exec.CommandContext(ctx, "ctr", "--address", c.Socket, "-n", "k8s.io", "images", "import", "-")
	imp.Stdin = rc
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", ref, err, out)
	}
	return nil
}
