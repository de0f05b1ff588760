// Package integration checks the exporter against a real containerd and a
// real dockerd started by internal/testenv. Its tests need root and the
// Debian packages containerd, runc, docker.io and busybox-static; make test
// installs them. Outside CI they skip with the reason when that is not met.
package integration
