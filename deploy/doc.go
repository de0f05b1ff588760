// Package deploy holds the deployment files (systemd, Kubernetes, Alertmanager)
// and the tests that check them offline.
package deploy
