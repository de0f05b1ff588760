// Copyright 2026 The pleg_exporter Authors
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
// http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

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
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

// projectImage gives the private dockerd the project's image, built by
// startImageBuild: plain docker build of a clean copy, offline, with a Go
// builder image made from this machine's Go (testenv.ProjectImage).
func projectImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		if image.done == nil {
			imageErr = fmt.Errorf("no image build: the private dockerd did not start: %v", dockErr)
			return
		}
		<-image.done
		if imageErr = image.err; imageErr != nil {
			return
		}
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var loaded string
		loaded, imageErr = testenv.ProjectImage(c, dockerd, "../..", projectImageRef, true)
		imageLog = image.log + "; " + loaded
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	t.Log("image:", imageLog)
	return projectImageRef
}

const projectImageRef = "pleg-exporter:test"

var (
	image     imageBuild
	imageOnce sync.Once
	imageLog  string
	imageErr  error
)

type imageBuild struct {
	done   chan struct{}
	cancel context.CancelFunc
	log    string
	err    error
}

// startImageBuild builds the project's image in the background, while the
// other tests run, on a dockerd of its own: a build's RUN steps are
// containers, which the Docker tests would count on the shared dockerd. It
// is always a build (this is the test of the Dockerfile); the build is
// saved, and projectImage loads it into the shared dockerd. TestMain calls
// image.cancel and waits for done before it stops the daemons.
func startImageBuild(dir string) {
	// Eight minutes for the build, four more in case the end-to-end
	// test's build holds the lock (testenv.ProjectImage).
	c, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	image = imageBuild{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(image.done)
		t0 := time.Now()
		d, err := testenv.StartDockerd(dir)
		if err != nil {
			image.err = fmt.Errorf("the image's dockerd: %w", err)
			return
		}
		defer d.Stop()
		image.log, image.err = testenv.ProjectImage(c, d, "../..", projectImageRef, false)
		image.log += fmt.Sprintf(" (in the background, %s in all)", time.Since(t0).Round(100*time.Millisecond))
	}()
}

// The Dockerfile builds from a clean copy with plain docker build, offline,
// on the private dockerd; the image holds the binary and the CA bundle only,
// and relists that dockerd through its socket.
func TestDockerfileImage(t *testing.T) {
	need(t, dockErr)
	c := ctx(t, 8*time.Minute)
	projectImage(t)
	img, _, err := dockerd.API.ImageInspectWithRaw(c, projectImageRef)
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if img.Config.User != "65534:65534" || img.Config.Labels["org.opencontainers.image.title"] != "pleg_exporter" ||
		img.Config.Labels["org.opencontainers.image.version"] != strings.TrimSpace(string(version)) || len(img.RootFS.Layers) != 1 {
		t.Errorf("image: user %q, labels %v, %d layers (want one: the binary and the CA bundle)", img.Config.User, img.Config.Labels, len(img.RootFS.Layers))
	}
	if files := imageFiles(t, c, projectImageRef); !slices.Equal(files, []string{"bin/pleg_exporter", "etc/ssl/certs/ca-certificates.crt"}) {
		t.Errorf("the image holds %q, want the binary and the CA bundle only", files)
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
			// The sample line, not the HELP text, which also begins
			// "pleg_runtime_up 1".
			if strings.Contains(body, "\npleg_runtime_up 1\n") {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(body, "\npleg_runtime_up 1\n") || !strings.Contains(body, `pleg_docker_containers{state="running"}`) ||
		!strings.Contains(body, `pleg_runtime_info{api_version=`) {
		t.Fatalf("image's /metrics:\n%s\nlogs:\n%s", body, containerLogs(c, cr.ID))
	}
	info, _ := dockerd.API.ContainerInspect(c, cr.ID)
	j, _ := json.Marshal(info.Config.User)
	t.Logf("image (%.1f MB) ran as user %s with group %d, relisted the private dockerd", float64(img.Size)/1e6, j, st.Gid)
	if lb := containerLogs(c, cr.ID); !strings.Contains(lb, "version="+strings.TrimSpace(string(version))) {
		t.Errorf("the exporter's start-up log does not name version %s:\n%s", version, lb)
	}
}

// imageFiles lists the regular files of an image, from docker save.
func imageFiles(t *testing.T, c context.Context, ref string) []string {
	t.Helper()
	rc, err := dockerd.API.ImageSave(c, []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(h.Name, ".tar") && !strings.HasPrefix(h.Name, "blobs/") {
			continue
		}
		// A layer (or any blob: a blob that is not a tar reads as none).
		lr := tar.NewReader(tr)
		for {
			lh, err := lr.Next()
			if err != nil {
				break
			}
			if lh.Typeflag == tar.TypeReg {
				files = append(files, strings.TrimPrefix(lh.Name, "./"))
			}
		}
	}
	slices.Sort(files)
	return files
}

// The Dockerfile's defaults follow the repository: the builder is the Go of
// go.mod's go line (the official image sets GOTOOLCHAIN=local, so another
// Go would refuse the module), and VERSION is the VERSION file's.
func TestDockerfileDefaults(t *testing.T) {
	goImage, err := testenv.DockerfileGoImage("../..")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil || goImage != "golang:"+string(m[1]) {
		t.Errorf("Dockerfile ARG GO_IMAGE=%s, go.mod's go line %q", goImage, m)
	}
	df, _ := os.ReadFile("../../Dockerfile")
	version, _ := os.ReadFile("../../VERSION")
	if !bytes.Contains(df, []byte("\nARG VERSION="+strings.TrimSpace(string(version))+"\n")) {
		t.Errorf("Dockerfile's ARG VERSION is not the VERSION file's %s", version)
	}
}

// containerLogs is a container's stdout and stderr as text: Docker sends
// them multiplexed, each frame behind an 8-byte header with NUL bytes, which
// would make the test log binary.
func containerLogs(c context.Context, id string) string {
	r, err := dockerd.API.ContainerLogs(c, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "(no logs: " + err.Error() + ")"
	}
	defer r.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, r); err != nil {
		fmt.Fprintf(&out, "(logs cut: %v)", err)
	}
	return out.String()
}
