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

package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ProjectImage gives the private dockerd d the project's image, tagged ref,
// built the way a pipeline that builds from the Dockerfile does: plain
// `docker build` of a clean copy of the tree (the files git tracks or would
// track: nothing it ignores, no prepared context), with --network=none, so
// the build reaches nothing. The Dockerfile's default builder image
// (GO_IMAGE) is made first from this machine's Go, since no registry is
// reachable (ImportGoImage). repo is the repository's root.
//
// Each build is saved under repo/.build, keyed by the clean copy's contents
// and the Go version; with reuse, a saved build of the same tree is loaded
// instead of building again (the end-to-end test reuses the integration
// test's). It returns what it did, for the test's log.
func ProjectImage(ctx context.Context, d *Dockerd, repo, ref string, reuse bool) (string, error) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		return "", fmt.Errorf("the docker CLI is not installed (docker.io): %w", err)
	}
	goImage, err := DockerfileGoImage(repo)
	if err != nil {
		return "", err
	}
	src, err := os.MkdirTemp("", "pleg-clean-copy")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	n, err := CleanCopy(repo, src)
	if err != nil {
		return "", err
	}
	key, err := treeKey(src)
	if err != nil {
		return "", err
	}
	cacheDir := filepath.Join(repo, ".build")
	cached := filepath.Join(cacheDir, "image-"+key+".tar")
	// One build at a time per repository: make test runs the integration
	// and end-to-end packages at once, and two builds of the same tree on
	// two cores take as long as each would alone, twice over. Whoever comes
	// second finds the first one's saved build (with reuse) and loads it.
	waited, unlock, err := lockBuild(ctx, cacheDir)
	if err != nil {
		return "", err
	}
	defer unlock()
	after := ""
	if waited > time.Second {
		after = fmt.Sprintf(", after %s waiting for another test's build", waited.Round(100*time.Millisecond))
	}
	if reuse {
		if f, err := os.Open(cached); err == nil {
			defer f.Close()
			if err := loadImage(ctx, d, f, cachedRef, ref); err != nil {
				return "", fmt.Errorf("load %s: %w", cached, err)
			}
			return fmt.Sprintf("loaded the docker build of the same clean copy (%d files) from %s%s", n, filepath.Base(cached), after), nil
		}
	}
	t0 := time.Now()
	version, err := ImportGoImage(ctx, d.API, src, goImage)
	if err != nil {
		return "", err
	}
	imported := time.Since(t0)
	t1 := time.Now()
	build := exec.CommandContext(ctx, docker, "build", "--network=none", "-t", ref, ".")
	build.Dir = src
	// The daemon under test and no configuration of the user's.
	build.Env = append(os.Environ(), "DOCKER_HOST=unix://"+d.Socket, "DOCKER_CONFIG="+filepath.Join(src, ".docker-config"))
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker build: %v\n%s", err, out)
	}
	built := time.Since(t1)
	if err := saveImage(ctx, d, ref, cacheDir, cached); err != nil {
		return "", err
	}
	return fmt.Sprintf("builder %s (%s, made in %s), clean copy of %d files, docker build --network=none in %s%s",
		goImage, version, imported.Round(100*time.Millisecond), n, built.Round(100*time.Millisecond), after), nil
}

// lockBuild takes the build lock of dir (a flock on dir/image.lock, which
// goes with the process that holds it, killed or not), waiting for it as
// long as ctx allows. It returns how long it waited.
func lockBuild(ctx context.Context, dir string) (time.Duration, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "image.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return 0, nil, err
	}
	t0 := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return time.Since(t0), func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return 0, nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return 0, nil, fmt.Errorf("waited %s for another test's image build (%s is locked): %w", time.Since(t0).Round(time.Second), f.Name(), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// cachedRef is the tag a saved build carries.
const cachedRef = "pleg-exporter:cached"

// treeKey hashes a tree's names, modes and contents, and the Go that builds
// it.
func treeKey(dir string) (string, error) {
	h := sha256.New()
	goVersion, err := goEnv("GOVERSION")
	if err != nil {
		return "", err
	}
	fmt.Fprintln(h, goVersion)
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "%s %o %d\n", rel, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

// saveImage writes ref as cachedRef to path (through a temporary file) and
// removes the older saved builds.
func saveImage(ctx context.Context, d *Dockerd, ref, dir, path string) error {
	if err := d.API.ImageTag(ctx, ref, cachedRef); err != nil {
		return err
	}
	rc, err := d.API.ImageSave(ctx, []string{cachedRef})
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "image-*.tar"))
	f, err := os.CreateTemp(dir, "image-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("docker save: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, o := range old {
		os.Remove(o)
	}
	return os.Rename(f.Name(), path)
}

func loadImage(ctx context.Context, d *Dockerd, r io.Reader, from, ref string) error {
	resp, err := d.API.ImageLoad(ctx, r)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || bytes.Contains(body, []byte(`"error"`)) {
		return fmt.Errorf("docker load: %v %s", err, body)
	}
	return d.API.ImageTag(ctx, from, ref)
}

// CleanCopy copies the files of repo that git tracks or would track (not
// the ones it ignores, such as .tools and .build) into dst, as a clean clone
// of the current tree has them. It returns how many it copied.
func CleanCopy(repo, dst string) (int, error) {
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = repo
	out, err := ls.Output()
	if err != nil {
		return 0, fmt.Errorf("git ls-files in %s: %w", repo, err)
	}
	n := 0
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(repo, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			return n, err
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return n, err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			link, err := os.Readlink(filepath.Join(repo, name))
			if err != nil {
				return n, err
			}
			if err := os.Symlink(link, to); err != nil {
				return n, err
			}
		} else {
			b, err := os.ReadFile(filepath.Join(repo, name))
			if err != nil {
				return n, err
			}
			if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
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
