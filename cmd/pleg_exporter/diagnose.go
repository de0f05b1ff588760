package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/pleg-exporter/pleg_exporter/collector/diagnose"
	"github.com/pleg-exporter/pleg_exporter/collector/runtimes"
)

// runDiagnose runs `pleg_exporter diagnose`: one read-only listing and report.
// Exit codes: 0 healthy, 1 at risk, 2 the runtime cannot be reached.
func runDiagnose(cfg runtimes.Config) int {
	if cfg.ProbeMax == 0 {
		cfg.ProbeMax = 20
	}
	rt, err := runtimes.Open(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, err)
		return 2
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	inv, err := runtimes.Inventory(ctx, rt, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: cannot list the runtime: %v\n", name, err)
		return 2
	}
	th := diagnose.DefaultThresholds
	th.LimitBytes = *grpcLimit
	th.Top = *nsTop
	report := diagnose.Build(inv, th, time.Now())
	if *outputFmt == "json" {
		if err := report.JSON(os.Stdout); err != nil {
			return 2
		}
	} else {
		report.Text(os.Stdout)
	}
	if report.AtRisk {
		return 1
	}
	return 0
}
