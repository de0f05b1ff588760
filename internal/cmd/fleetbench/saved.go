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

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Each run's result is saved as JSON in -results, named by fleet size and
// run, with what it was measured under. A later fleetbench under the same
// parameters, cores, rules and dashboards reuses it instead of measuring it
// again (-fresh measures everything): the sizes can be measured one
// invocation at a time (-nodes 1000, then -nodes 1000,5000) and a run that
// stopped part-way loses only the run it was in.

// params are what a saved result must have been measured under to be
// reused.
type params struct {
	Run, History, Range, Step, FaultAfter time.Duration
	Reps, Cores                           int
	// Mixin is a digest of the rule files and the dashboards measured.
	Mixin string
}

// saved is one run's result as stored.
type saved struct {
	Params   params
	Commit   string // the repository's commit, "-dirty" when it had changes
	Measured time.Time
	Took     time.Duration
	Single   *singleResult `json:",omitempty"`
	Thanos   *thanosResult `json:",omitempty"`
}

// currentParams are this invocation's parameters.
func currentParams() (params, error) {
	h := sha256.New()
	for _, f := range ruleFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			return params{}, err
		}
		h.Write(b)
	}
	for _, multi := range []bool{false, true} {
		files, err := renderedDashboards(multi)
		if err != nil {
			return params{}, err
		}
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			h.Write([]byte(n))
			h.Write(files[n])
		}
	}
	return params{Run: *warmup, History: *historyFlag, Range: *rangeFlag, Step: *stepFlag, FaultAfter: *faultAfter,
		Reps: *reps, Cores: runtime.NumCPU(), Mixin: hex.EncodeToString(h.Sum(nil))[:16]}, nil
}

// commit names the repository's commit.
func commit() string {
	out, err := exec.Command("git", "-C", repoRoot, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", repoRoot, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "-dirty"
	}
	return c
}

// errNotSaved: under -saved-only, a run with no saved result.
var errNotSaved = errors.New("fleetbench: no saved result")

// measureOrReuse returns the result saved as name under p, or measures it
// with run and saves it.
func measureOrReuse(name string, p params, run func(*saved) error) (*saved, error) {
	path := filepath.Join(*resultsDir, name+".json")
	if *resultsDir != "" && !*fresh {
		sv, err := load(path)
		switch {
		case err == nil && sv.Params == p:
			log.Printf("%s: reusing the result measured at %s on %s (%s; -fresh measures again)",
				name, sv.Measured.UTC().Format(time.DateTime), sv.Commit, path)
			return sv, nil
		case err == nil:
			log.Printf("%s: the saved result was measured under %+v, not %+v: measuring again", name, sv.Params, p)
		case !errors.Is(err, fs.ErrNotExist):
			log.Printf("%s: %v: measuring again", name, err)
		}
	}
	if *savedOnly {
		log.Printf("%s: not saved under these parameters; -saved-only leaves it out", name)
		return nil, errNotSaved
	}
	sv := &saved{Params: p, Commit: commit(), Measured: time.Now()}
	if err := run(sv); err != nil {
		return nil, err
	}
	sv.Took = time.Since(sv.Measured)
	if *resultsDir == "" {
		return sv, nil
	}
	b, err := json.MarshalIndent(sv, "", " ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(*resultsDir, 0o755); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, err
	}
	return sv, os.Rename(tmp, path)
}

func load(path string) (*saved, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sv saved
	if err := json.Unmarshal(b, &sv); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if sv.Single == nil && sv.Thanos == nil {
		return nil, fmt.Errorf("%s: no result", path)
	}
	return &sv, nil
}
