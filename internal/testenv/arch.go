package testenv

import "runtime"

func goarch() string { return runtime.GOARCH }
