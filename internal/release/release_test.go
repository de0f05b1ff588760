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

// Package release tests make release: the tarballs are reproducible and
// hold what they say.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

const repo = "../.."

// release runs scripts/release.sh in dir with env, into out.
func release(t *testing.T, dir, out string, env ...string) {
	t.Helper()
	cmd := exec.Command("bash", "scripts/release.sh")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "OUT="+out, "RELEASE_DIRTY=1"), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release in %s: %v\n%s", dir, err, b)
	}
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(b))
}

// The same commit built twice, the second time from a copy of the tree
// elsewhere with an empty Go build cache, gives the same bytes; each
// tarball holds the binary, the license, the docs and the rendered mixin,
// and the binary says its version and commit.
func TestReleaseIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the exporter three times")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	revision, epoch := git(t, "rev-parse", "HEAD"), git(t, "log", "-1", "--format=%ct", "HEAD")
	one, two := t.TempDir(), t.TempDir()
	release(t, repo, one, "REVISION="+revision, "SOURCE_DATE_EPOCH="+epoch)

	src := filepath.Join(t.TempDir(), "elsewhere", "pleg_exporter")
	if _, err := testenv.CleanCopy(repo, src); err != nil {
		t.Fatal(err)
	}
	release(t, src, two, "REVISION="+revision, "SOURCE_DATE_EPOCH="+epoch, "GOCACHE="+t.TempDir())

	version := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(repo, "VERSION")))))
	sums := must(os.ReadFile(filepath.Join(one, "sha256sums.txt")))
	if other := must(os.ReadFile(filepath.Join(two, "sha256sums.txt"))); !bytes.Equal(sums, other) {
		t.Fatalf("two builds of %s differ:\n%s\n%s", revision[:12], sums, other)
	}
	t.Logf("make release, twice (the second from a copy with an empty build cache), same bytes:\n%s", sums)
	for _, arch := range []string{"amd64", "arm64"} {
		name := "pleg_exporter-" + version + ".linux-" + arch
		a := must(os.ReadFile(filepath.Join(one, name+".tar.gz")))
		if !bytes.Equal(a, must(os.ReadFile(filepath.Join(two, name+".tar.gz")))) {
			t.Errorf("%s differs between the builds", name)
		}
		files := untar(t, a, filepath.Join(t.TempDir(), arch))
		want := []string{"CHANGELOG.md", "LICENSE", "README.md", "dashboards/pleg-fleet.json", "dashboards/pleg-node.json",
			"mixin/prometheus_alerts.yaml", "mixin/prometheus_rules.yaml", "pleg_exporter"}
		var got []string
		for f, h := range files {
			got = append(got, strings.TrimPrefix(f, name+"/"))
			if h.Uid != 0 || h.Gid != 0 || !strings.HasPrefix(f, name+"/") {
				t.Errorf("%s: %s owned %d:%d", name, f, h.Uid, h.Gid)
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s holds %v, want %v", name, got, want)
		}
		if files[name+"/pleg_exporter"].Mode&0o111 == 0 {
			t.Errorf("%s: the binary is not executable", name)
		}
	}
	if runtime.GOARCH == "amd64" {
		bin := filepath.Join(t.TempDir(), "amd64", "pleg_exporter-"+version+".linux-amd64", "pleg_exporter")
		untar(t, must(os.ReadFile(filepath.Join(one, "pleg_exporter-"+version+".linux-amd64.tar.gz"))), filepath.Dir(filepath.Dir(bin)))
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "version "+version) || !strings.Contains(string(out), revision) {
			t.Errorf("pleg_exporter --version: %v\n%s\nwant version %s and revision %s", err, out, version, revision)
		}
	}
}

// untar writes a .tar.gz under dir and returns its files' headers.
func untar(t *testing.T, tgz []byte, dir string) map[string]*tar.Header {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		files[h.Name] = h
		p := filepath.Join(dir, h.Name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		b := must(io.ReadAll(tr))
		if err := os.WriteFile(p, b, os.FileMode(h.Mode)&0o777); err != nil {
			t.Fatal(err)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
