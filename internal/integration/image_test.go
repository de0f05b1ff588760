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
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

// The Dockerfile builds offline (FROM scratch) on the private dockerd, and
// the image relists that dockerd through its socket.
func TestDockerfileImage(t *testing.T) {
	need(t, dockErr)
	c := ctx(t, 3*time.Minute)
	dir := t.TempDir()
	bin := filepath.Join(dir, "pleg_exporter")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/pleg_exporter")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// The build context make image prepares: Dockerfile, binary, CA bundle.
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	add := func(name, src string, mode int64) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(b))})
		tw.Write(b)
	}
	add("Dockerfile", "../../Dockerfile", 0o644)
	add("pleg_exporter", bin, 0o755)
	add(".build/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt", 0o644)
	tw.Close()
	resp, err := dockerd.API.ImageBuild(c, &ctxTar, types.ImageBuildOptions{Tags: []string{"pleg-exporter:test"}, Remove: true,
		BuildArgs: map[string]*string{"VERSION": strPtr("test")}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(out, []byte(`"error"`)) {
		t.Fatalf("docker build: %s", out)
	}
	img, _, err := dockerd.API.ImageInspectWithRaw(c, "pleg-exporter:test")
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
		Image: "pleg-exporter:test",
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
