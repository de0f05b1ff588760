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
	bin, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	mod := time.Unix(1764000000, 0)
	for _, d := range []string{"bin/", "tmp/", "etc/", "proc/", "sys/", "dev/"} {
		lw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mod})
	}
	lw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin)), ModTime: mod})
	lw.Write(bin)
	for _, a := range []string{"sh", "sleep", "true", "false", "cat", "echo", "ls"} {
		lw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", ModTime: mod})
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
		"config": map[string]any{
			"Cmd": []string{"/bin/sleep", "100000"},
			"Env": []string{"PATH=/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
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
