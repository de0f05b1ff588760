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

package detect

import (
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
)

// Sockets are the unix sockets this configuration may relist through: the
// endpoint (or every candidate when it is auto-detected) and the Docker host.
func (c Config) Sockets() []string {
	var eps []string
	if c.Endpoint != "" {
		eps = append(eps, c.Endpoint)
	} else {
		cands := c.Candidates
		if cands == nil {
			cands = DefaultCandidates
		}
		for _, cand := range cands {
			eps = append(eps, cand.Endpoint)
		}
	}
	switch c.DockerHost {
	case "none":
	case "":
		eps = append(eps, DefaultDockerHost)
	default:
		eps = append(eps, c.DockerHost)
	}
	var paths []string
	for _, ep := range eps {
		if p, err := cri.SocketPath(ep); err == nil {
			paths = append(paths, p)
		}
	}
	return paths
}

// StaleSocketError says a socket the exporter connects through was deleted
// on the host while a bind mount keeps showing this process the old one.
type StaleSocketError struct {
	Socket, Deleted string
}

func (e *StaleSocketError) Error() string {
	what := "the socket"
	if e.Deleted != e.Socket {
		what = "its directory " + e.Deleted
	}
	return fmt.Sprintf("runtime socket %s is stale: %s was deleted on the host (the runtime restarted) and a bind mount still shows the old one, which nothing listens on; restart the exporter, and mount the socket's directory instead of the socket file", e.Socket, what)
}

// StaleSocket returns a *StaleSocketError for the first socket that is, or
// lies under a directory that is, a bind-mounted inode deleted on the host.
//
// containerd, CRI-O, cri-dockerd and dockerd delete and re-create their
// socket when they restart. A container that had the socket file bind-mounted
// keeps the old inode: every connect is refused from then on, and no amount
// of reconnecting helps, only a new mount. Such an inode is the one thing
// stat(2) reports with no links left, so a link count of 0 is a sure sign;
// a socket that is merely missing (the runtime is down) is not stale.
func StaleSocket(sockets ...string) error {
	for _, s := range sockets {
		for p := s; ; p = filepath.Dir(p) {
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err == nil && st.Nlink == 0 {
				return &StaleSocketError{Socket: s, Deleted: p}
			}
			if p == "/" || p == "." {
				break
			}
		}
	}
	return nil
}
