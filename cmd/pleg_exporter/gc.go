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
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pleg-exporter/pleg_exporter/diagnose"
	"github.com/pleg-exporter/pleg_exporter/gc"
	"github.com/pleg-exporter/pleg_exporter/runtime/detect"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

// Exit codes of `pleg_exporter gc`.
const (
	gcExitDone        = 0   // done, or nothing to do, or a dry run
	gcExitFailures    = 1   // some removals failed (each is reported)
	gcExitUnreachable = 2   // the runtime cannot be reached (or stopped answering)
	gcExitNoReport    = 3   // the report could not be written (stdout full or closed)
	gcExitInterrupted = 130 // Ctrl-C or SIGTERM: 128 + SIGINT, as a shell reports it
)

var (
	gcCmd          = kingpin.Command("gc", "Remove what the kubelet's container GC would, reading the runtime through lists that fit past the 16 MiB limit where the kubelet's own GC fails. A dry run unless --apply: prints, per namespace, what the kubelet's policy and --finished-pods would remove and whether the list answers then fit. Exit 0 done or nothing to do, 1 some removals failed, 2 runtime unreachable, 3 the report could not be written, 130 interrupted.")
	gcRuntime      = addRuntimeFlags(gcCmd)
	gcApply        = gcCmd.Flag("apply", "Remove what the plan says (default: a dry run that changes nothing).").Bool()
	gcFinishedPods = gcCmd.Flag("finished-pods", "Also remove every pod that has no ready sandbox, containers and sandboxes, as the kubelet does for pods deleted from the API server (which gc cannot see). Their logs go with them.").Bool()
	gcKeep         = gcCmd.Flag("keep-per-container", "Not-running containers to keep per (pod, container name), newest first: the kubelet's --maximum-dead-containers-per-container.").Default("1").Int()
	gcMinAge       = gcCmd.Flag("min-age", "Keep containers younger than this: the kubelet's --minimum-container-ttl-duration.").Default("0s").Duration()
	gcUntilRatio   = gcCmd.Flag("until-ratio", "Stop, oldest first, once both list answers are under this share of --pleg.grpc-limit-bytes (0: remove everything the policy allows).").Default("0").Float64()
	gcRate         = gcCmd.Flag("rate", "Removal calls per second at most, one at a time, so the runtime keeps answering the kubelet.").Default("50").Float64()
	gcTimeout      = gcCmd.Flag("timeout", "Deadline of each removal; one that reaches it is reported and skipped.").Default("30s").Duration()
	gcOutput       = gcCmd.Flag("output", "Report format: text or json. Progress goes to stderr either way.").Default("text").Enum("text", "json")
)

// gcOptions are the gc command's flags besides the runtime's.
type gcOptions struct {
	policy  gc.Policy
	apply   bool
	run     gc.Options
	output  string
	command string // the command line a recommendation starts from
}

// gcCommandLine is the gc command for the runtime cfg names, as a
// recommendation prints it: the runtime flags that were given, nothing
// else. Values go through diagnose.ShellWord: an endpoint is a path.
func gcCommandLine(cfg detect.Config, limit int64) string {
	cmd := name + " gc"
	if cfg.Kind != detect.KindAuto {
		cmd += " --runtime=" + cfg.Kind
	}
	if cfg.Endpoint != "" {
		cmd += " --runtime.endpoint=" + diagnose.ShellWord(cfg.Endpoint)
	}
	if cfg.DockerHost != "" {
		cmd += " --docker.host=" + diagnose.ShellWord(cfg.DockerHost)
	}
	if limit != defaultGRPCLimit {
		cmd += fmt.Sprintf(" --pleg.grpc-limit-bytes=%d", limit)
	}
	return cmd
}

// gcConfig is gc's runtime configuration and options, checked.
func gcConfig(logger *slog.Logger) (detect.Config, gcOptions, error) {
	cfg, err := gcRuntime.config(logger)
	if err != nil {
		return cfg, gcOptions{}, err
	}
	o, err := gcFlags(cfg, *gcRuntime.limit)
	return cfg, o, err
}

func gcFlags(cfg detect.Config, limit int64) (gcOptions, error) {
	o := gcOptions{
		policy: gc.Policy{KeepPerContainer: *gcKeep, FinishedPods: *gcFinishedPods, MinAge: *gcMinAge, UntilRatio: *gcUntilRatio, LimitBytes: limit},
		apply:  *gcApply, output: *gcOutput, run: gc.DefaultOptions, command: gcCommandLine(cfg, limit),
	}
	o.run.Rate, o.run.Timeout = *gcRate, *gcTimeout
	switch {
	case *gcKeep < 0:
		return o, fmt.Errorf("--keep-per-container must be 0 or more, got %d", *gcKeep)
	case *gcMinAge < 0:
		return o, fmt.Errorf("--min-age must be 0 or more, got %s", *gcMinAge)
	case *gcUntilRatio < 0 || *gcUntilRatio > 1:
		return o, fmt.Errorf("--until-ratio must be between 0 (off) and 1, got %g", *gcUntilRatio)
	case !(*gcRate > 0):
		return o, fmt.Errorf("--rate must be positive, got %g", *gcRate)
	case *gcTimeout <= 0:
		return o, fmt.Errorf("--timeout must be positive, got %s", *gcTimeout)
	}
	return o, nil
}

// runGC runs `pleg_exporter gc`: list, plan both policies, print; with
// --apply remove the selected plan, then list once more the way the kubelet
// does to say whether its relist works again.
func runGC(cfg detect.Config, o gcOptions, stdout, stderr io.Writer) int {
	stop, unnotify := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer unnotify()
	finished, exited := make(chan struct{}), make(chan struct{})
	defer func() {
		close(finished)
		<-exited // its message, if any, is out before the summary ends the process
	}()
	applying := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-finished:
			return
		case <-stop.Done():
		}
		// A second Ctrl-C kills at once.
		unnotify()
		select {
		case <-applying:
			fmt.Fprintf(stderr, "%s gc: stopping after the call in flight (Ctrl-C again to quit now)\n", name)
		default:
		}
	}()
	errorf := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "%s gc: error: %s\n", name, kubecontainer.Printable(fmt.Sprintf(format, a...)))
		return code
	}

	rt, err := detect.OpenGC(cfg)
	if err != nil {
		return errorf(gcExitUnreachable, "%v", err)
	}
	defer rt.Close()
	lctx, cancel := context.WithTimeout(stop, 10*time.Minute)
	defer cancel()
	inv, err := rt.Inventory(lctx)
	if err != nil {
		if stop.Err() != nil {
			return errorf(gcExitInterrupted, "interrupted while listing; nothing was removed")
		}
		return errorf(gcExitUnreachable, "cannot list the runtime: %v", err)
	}
	report := gc.NewReport(inv, o.policy, diagnose.DefaultThresholds.PayloadRatio, o.command, time.Now())
	code := gcExitDone
	if o.apply {
		opts := o.run
		opts.Progress = stderr
		close(applying)
		res := gc.Apply(stop, rt, report.Plan(), opts)
		report.Applied = res
		switch {
		case res.GaveUp != "":
			code = gcExitUnreachable
		case res.Interrupted:
			code = gcExitInterrupted
		case len(res.Failures) > 0:
			code = gcExitFailures
		}
		if !res.Interrupted && res.GaveUp == "" && stop.Err() == nil {
			// What the kubelet's next relist will find: its two
			// unfiltered calls, measured against its limit.
			vctx, vcancel := context.WithTimeout(context.Background(), cfg.Timeout)
			report.Verify(rt.Relist(vctx))
			vcancel()
		}
	}
	if o.output == "json" {
		if err := report.JSON(stdout); err != nil {
			// Whatever was removed stays removed; the next dry run says
			// what is left.
			return errorf(gcExitNoReport, "cannot write the report: %v", err)
		}
	} else {
		report.Text(stdout)
	}
	return code
}
