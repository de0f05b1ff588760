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

// Command hostcheck is make test's check that the tests put the host back:
// `hostcheck save FILE` before the first daemon starts puts back what a
// killed run left (testenv.CleanLeftovers), then records the sysctls,
// mounts, cgroups, network interfaces and fixed host paths the harness
// changes (testenv.HostState); `hostcheck compare FILE` after the last one
// stops reads them again and exits 1 naming each difference.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/pleg-exporter/pleg_exporter/internal/testenv"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "save" && os.Args[1] != "compare") {
		fmt.Fprintln(os.Stderr, "usage: hostcheck save|compare FILE")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "hostcheck:", err)
		os.Exit(1)
	}
}

func run(verb, file string) error {
	if verb == "save" && os.Geteuid() == 0 {
		// A killed run's daemons and changes go first, so the record is
		// the host as it was before that run, not what the tests would
		// then clean up and report as a difference.
		done, err := testenv.CleanLeftovers()
		for _, d := range done {
			fmt.Println("make test:", d)
		}
		if err != nil {
			return fmt.Errorf("clean up after a killed run: %w", err)
		}
	}
	now, err := testenv.ReadHostState()
	if err != nil {
		return fmt.Errorf("read the host: %w", err)
	}
	if verb == "save" {
		b, _ := json.MarshalIndent(now, "", "  ")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return err
		}
		fmt.Printf("make test: recorded the host before the tests (%d sysctls, %d mounts, %d cgroups, %d network interfaces, %d fixed paths) in %s\n",
			len(now.Sysctls), len(now.Mounts), len(now.Cgroups), len(now.Links), len(now.Paths), file)
		return nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("the record of the host before the tests: %w", err)
	}
	var before testenv.HostState
	if err := json.Unmarshal(raw, &before); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	diff := before.Diff(now)
	if len(diff) == 0 {
		fmt.Printf("make test: the host is as it was before the tests: %d sysctls, %d mounts, %d cgroups, %d network interfaces, %d fixed paths, no daemon record left\n",
			len(now.Sysctls), len(now.Mounts), len(now.Cgroups), len(now.Links), len(now.Paths))
		return nil
	}
	for _, d := range diff {
		fmt.Println("make test: host not restored:", d)
	}
	return fmt.Errorf("the tests left %d difference(s) on the host (above)", len(diff))
}
