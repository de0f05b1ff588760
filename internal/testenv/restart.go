package testenv

import (
	"syscall"
	"time"
)

// Terminate stops the daemon the way systemctl stop does (SIGTERM, SIGKILL
// after 15 s), leaving its state and containers for Restart.
func (c *Containerd) Terminate() {
	if c.cmd == nil {
		return
	}
	c.cmd.Process.Signal(syscall.SIGCONT)
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	c.log.Close()
}
