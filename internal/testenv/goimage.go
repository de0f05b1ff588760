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
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// DockerfileGoImage returns the builder image the repository's Dockerfile
// names by default (its ARG GO_IMAGE).
func DockerfileGoImage(repo string) (string, error) {
	b, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^ARG GO_IMAGE=(\S+)$`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s/Dockerfile has no ARG GO_IMAGE=<image>", repo)
	}
	return string(m[1]), nil
}

// ImportGoImage makes a Go builder image without a registry and tags it
// ref on the daemon api talks to: this machine's Go toolchain (GOROOT, at
// /usr/local/go as in the official images), its static busybox as the
// shell, the CA bundle, and a module cache (/go/pkg/mod) holding just the
// modules the exporter's build reads, taken from the local module cache.
// GOPROXY=off in the image: a build in it reaches nothing. repo is the tree
// that will be built (its go.mod and packages); it returns the toolchain's
// version (go1.x.y).
func ImportGoImage(ctx context.Context, api *client.Client, repo, ref string) (string, error) {
	goroot, err := goEnv("GOROOT")
	if err != nil {
		return "", err
	}
	version, err := goEnv("GOVERSION")
	if err != nil {
		return "", err
	}
	mods, err := os.MkdirTemp("", "pleg-gomod")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(mods)
	if err := fillModCache(ctx, repo, mods); err != nil {
		return "", err
	}
	bb, err := staticBusybox()
	if err != nil {
		return "", err
	}
	applets, err := exec.CommandContext(ctx, bb, "--list").Output()
	if err != nil {
		return "", fmt.Errorf("busybox --list: %w", err)
	}

	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := writeGoRootfs(pw, goroot, filepath.Join(mods, "cache", "download"), bb, strings.Fields(string(applets)))
		pw.CloseWithError(err)
		written <- err
	}()
	// The writer reads mods until it ends: wait for it before they go.
	defer func() {
		pr.Close()
		<-written
	}()
	rc, err := api.ImageImport(ctx, image.ImportSource{Source: pr, SourceName: "-"}, ref, image.ImportOptions{
		Message: "Go " + version + " from the local toolchain, with the exporter's modules",
		Changes: []string{
			"ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"ENV GOPATH=/go",
			"ENV GOTOOLCHAIN=local",
			"ENV GOPROXY=off",
			"ENV HOME=/root",
			"WORKDIR /go",
		},
	})
	if err != nil {
		return "", fmt.Errorf("docker import %s: %w", ref, err)
	}
	defer rc.Close()
	body, err := io.ReadAll(rc)
	if err != nil || bytes.Contains(body, []byte(`"error"`)) {
		return "", fmt.Errorf("docker import %s: %v %s", ref, err, body)
	}
	return version, nil
}

// goCmd is the Go that builds the exporter here: $GO (make's), else go.
func goCmd() string { return cmp.Or(os.Getenv("GO"), "go") }

func goEnv(key string) (string, error) {
	out, err := exec.Command(goCmd(), "env", key).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", key, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// fillModCache builds the exporter once with an empty module cache (dir)
// whose proxy is the local module cache: what lands in dir is exactly what
// the Dockerfile's go build reads. A module the local cache lacks comes from
// the configured GOPROXY.
func fillModCache(ctx context.Context, repo, dir string) error {
	local, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	proxy, err := goEnv("GOPROXY")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCmd(), "build", "-o", os.DevNull, "./cmd/pleg_exporter")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GOMODCACHE="+dir, "GOPROXY=file://"+filepath.Join(local, "cache", "download")+","+proxy,
		"GOFLAGS=-mod=readonly -modcacherw", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("collect the exporter's modules: %v\n%s", err, out)
	}
	return nil
}

// writeGoRootfs writes the builder's root filesystem as a tar.
func writeGoRootfs(w io.Writer, goroot, downloads, busybox string, applets []string) error {
	tw := tar.NewWriter(w)
	mod := time.Unix(1764000000, 0)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: mod})
	}
	for _, d := range []string{"bin", "etc", "etc/ssl", "etc/ssl/certs", "usr", "usr/local", "go", "go/bin", "go/pkg", "go/pkg/mod", "go/pkg/mod/cache", "proc", "sys", "dev"} {
		if err := dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := errors.Join(dir("tmp", 0o1777), dir("root", 0o700), addFile(tw, "bin/busybox", busybox)); err != nil {
		return err
	}
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", ModTime: mod}); err != nil {
			return err
		}
	}
	if err := addFile(tw, "etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt"); err != nil {
		return fmt.Errorf("the CA bundle (install ca-certificates): %w", err)
	}
	// What go build reads: the standard library's sources and the compiler,
	// assembler and linker; not the toolchain's own sources and tests, nor
	// the tools a build does not run (a third of GOROOT, as much of the
	// import's time).
	tools := filepath.Join("pkg", "tool", "linux_"+goarch())
	if err := addTree(tw, goroot, "usr/local/go", func(rel string) bool {
		switch rel {
		case "test", "api", "doc", "misc", filepath.Join("src", "cmd"):
			return true
		}
		if filepath.Dir(rel) == tools {
			switch filepath.Base(rel) {
			case "compile", "asm", "link", "cgo", "buildid", "pack":
				return false
			}
			return true
		}
		return filepath.Base(rel) == "testdata"
	}); err != nil {
		return err
	}
	if err := addTree(tw, downloads, "go/pkg/mod/cache/download", func(string) bool { return false }); err != nil {
		return err
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// addTree adds the tree at src under name, leaving out what skip says. A
// symbolic link that stays inside the tree is kept as a link; one that
// leaves it (Debian's packaged Go links GOROOT/src into /usr/share) is
// replaced by what it points at.
func addTree(tw *tar.Writer, src, name string, skip func(rel string) bool) error {
	src, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel != "." && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.ToSlash(filepath.Join(name, rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Name: target + "/", Typeflag: tar.TypeDir, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()})
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			to, err := filepath.EvalSymlinks(path)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if r, err := filepath.Rel(src, to); err != nil || r == ".." || strings.HasPrefix(r, "../") {
				return addTree(tw, to, target, func(string) bool { return false })
			}
			return tw.WriteHeader(&tar.Header{Name: target, Typeflag: tar.TypeSymlink, Linkname: link, ModTime: fi.ModTime()})
		case fi.Mode().IsRegular():
			return addFile(tw, target, path)
		}
		return nil // sockets, devices: none in a toolchain
	})
}
