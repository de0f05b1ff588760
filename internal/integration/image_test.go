package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

// projectImage builds the project's image once per test binary, with the
// Dockerfile and the build context make image prepares, on the private
// dockerd. Nothing is pulled: the Dockerfile starts FROM scratch.
func projectImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() { imageErr = buildProjectImage() })
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return projectImageRef
}

const projectImageRef = "pleg-exporter:test"

var (
	imageOnce sync.Once
	imageErr  error
)

func buildProjectImage() error {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp(workRoot, "image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "pleg_exporter")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/pleg_exporter")
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
		{"Dockerfile", "../../Dockerfile", 0o644},
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
	resp, err := dockerd.API.ImageBuild(c, &ctxTar, types.ImageBuildOptions{Tags: []string{projectImageRef}, Remove: true,
		BuildArgs: map[string]*string{"VERSION": strPtr("test")}})
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

// The Dockerfile builds offline (FROM scratch) on the private dockerd, and
// the image relists that dockerd through its socket.
func TestDockerfileImage(t *testing.T) {
	need(t, dockErr)
	c := ctx(t, 3*time.Minute)
	projectImage(t)
	img, _, err := dockerd.API.ImageInspectWithRaw(c, projectImageRef)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config.User != "65534:65534" || img.Config.Labels["org.opencontainers.image.title"] != "pleg_exporter" || len(img.RootFS.Layers) != 2 {
		t.Errorf("image: user %q, labels %v, %d layers", img.Config.User, img.Config.Labels, len(img.RootFS.Layers))
	}

	// Non-root, with the socket's group added: the documented way to run it.
	var st syscall.Stat_t
	if err := syscall.Stat(dockerd.Socket, &st); err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	cr, err := dockerd.API.ContainerCreate(c, &container.Config{
		Image: projectImageRef,
		Cmd:   []string{"--runtime.endpoint=unix:///var/run/docker.sock", "--web.listen-address=" + addr, "--relist.interval=1s"},
	}, &container.HostConfig{
		NetworkMode:    "host",
		GroupAdd:       []string{fmt.Sprint(st.Gid)},
		Binds:          []string{dockerd.Socket + ":/var/run/docker.sock:ro"},
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
	}, nil, nil, "pleg-exporter-image-test")
	if err != nil {
		t.Fatal(err)
	}
	defer dockerd.API.ContainerRemove(context.Background(), cr.ID, container.RemoveOptions{Force: true})
	if err := dockerd.API.ContainerStart(c, cr.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	var body string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			body = string(b)
			if strings.Contains(body, "pleg_runtime_up 1") {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(body, "pleg_runtime_up 1") || !strings.Contains(body, `pleg_docker_containers{state="running"}`) ||
		!strings.Contains(body, `pleg_runtime_info{api_version=`) {
		logs, _ := dockerd.API.ContainerLogs(c, cr.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
		lb := []byte{}
		if logs != nil {
			lb, _ = io.ReadAll(logs)
		}
		t.Fatalf("image's /metrics:\n%s\nlogs:\n%s", body, lb)
	}
	info, _ := dockerd.API.ContainerInspect(c, cr.ID)
	j, _ := json.Marshal(info.Config.User)
	t.Logf("image built FROM scratch (%d layers), ran as user %s with group %d, relisted the private dockerd", len(img.RootFS.Layers), j, st.Gid)
}

func strPtr(s string) *string { return &s }
