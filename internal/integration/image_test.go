package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
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
	return testenv.BuildProjectImage(c, dockerd, "../..", projectImageRef)
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
