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
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// WriteImageTar writes a docker-archive image (the format of docker save,
// which ctr images import and docker load read) holding the host's static
// busybox and its applet links, with CMD sleep. Built locally because no
// registry is reachable.
func WriteImageTar(path, ref string) error {
	bb, err := staticBusybox()
	if err != nil {
		return err
	}
	files := []imageFile{{Name: "bin/busybox", Src: bb}}
	for _, a := range []string{"sh", "sleep", "true", "false", "cat", "echo", "ls"} {
		files = append(files, imageFile{Name: "bin/" + a, Link: "busybox"})
	}
	return writeImage(path, ref, files, map[string]any{"Cmd": []string{"/bin/sleep", "100000"}, "Env": []string{"PATH=/bin"}})
}

// WriteBinaryImage writes a docker-archive image of one host binary at
// /bin/NAME as its entrypoint, with the shared libraries it loads (ldd's
// list, at the paths ld.so looks them up) and the host files extra at
// their own paths, for the daemons the cluster tests run from Debian's
// packages or the module proxy (Prometheus, Alertmanager, the operator's
// config reloader).
func WriteBinaryImage(path, ref, bin, name string, extra ...string) error {
	files := []imageFile{{Name: "bin/" + name, Src: bin}}
	for _, e := range extra {
		files = append(files, imageFile{Name: strings.TrimPrefix(e, "/"), Src: e})
	}
	dynamic, err := isDynamic(bin)
	if err != nil {
		return err
	}
	if dynamic {
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			return fmt.Errorf("ldd %s: %w", bin, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
			// "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
			f := strings.Fields(line)
			lib := ""
			if len(f) >= 3 && f[1] == "=>" {
				lib = f[2]
			} else if len(f) >= 1 && strings.HasPrefix(f[0], "/") {
				lib = f[0]
			}
			if lib != "" {
				files = append(files, imageFile{Name: strings.TrimPrefix(lib, "/"), Src: lib})
			}
		}
	}
	return writeImage(path, ref, files, map[string]any{"Entrypoint": []string{"/bin/" + name}, "Env": []string{"PATH=/bin"}})
}

// imageFile is one file of an image: a copy of Src (links followed), or a
// symbolic link to Link.
type imageFile struct {
	Name, Src, Link string
}

// writeImage writes a one-layer docker-archive image of files with the
// image config cfg, every time stamp fixed (the same files give the same
// image id).
func writeImage(path, ref string, files []imageFile, cfg map[string]any) error {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	mod := time.Unix(1764000000, 0)
	dirs := map[string]bool{}
	mkdir := func(d string, mode int64) {
		if !dirs[d] {
			dirs[d] = true
			lw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: mod})
		}
	}
	for _, d := range []string{"bin", "etc", "proc", "sys", "dev"} {
		mkdir(d, 0o755)
	}
	mkdir("tmp", 0o1777)
	for _, f := range files {
		parts := strings.Split(filepath.Dir(f.Name), "/")
		for i := range parts {
			if parts[0] != "." {
				mkdir(strings.Join(parts[:i+1], "/"), 0o755)
			}
		}
		if f.Link != "" {
			lw.WriteHeader(&tar.Header{Name: f.Name, Typeflag: tar.TypeSymlink, Linkname: f.Link, ModTime: mod})
			continue
		}
		b, err := os.ReadFile(f.Src)
		if err != nil {
			return err
		}
		if err := lw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o755, Size: int64(len(b)), ModTime: mod}); err != nil {
			return err
		}
		lw.Write(b)
	}
	if err := lw.Close(); err != nil {
		return err
	}
	diff := sha256.Sum256(layer.Bytes())
	diffID := "sha256:" + hex.EncodeToString(diff[:])
	config, _ := json.Marshal(map[string]any{
		"architecture": goarch(),
		"os":           "linux",
		"created":      mod.UTC().Format(time.RFC3339),
		"config":       cfg,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	csum := sha256.Sum256(config)
	configName := hex.EncodeToString(csum[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{strings.TrimPrefix(ref, "docker.io/")},
		"Layers":   []string{"layer.tar"},
	}})

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"layer.tar", layer.Bytes()}, {configName, config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: mod}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// staticBusybox returns the path of the host's busybox, which must be
// static: the images it goes into have no ld.so.
func staticBusybox() (string, error) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("busybox-static not installed: %w", err)
	}
	if dynamic, err := isDynamic(bb); err != nil || dynamic {
		return "", fmt.Errorf("%s is not a static binary (%v); install busybox-static", bb, err)
	}
	return bb, nil
}

// isDynamic reports whether an ELF binary needs an interpreter (ld.so),
// which the image does not have.
func isDynamic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}
