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

package cri_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
	"github.com/pleg-exporter/pleg_exporter/runtime/cri"
	"github.com/pleg-exporter/pleg_exporter/runtime/kubecontainer"
)

func startRemover(t *testing.T, spec fakecri.Spec) (*fakecri.Server, *cri.Remover, []*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	t.Helper()
	srv, err := fakecri.Start(filepath.Join(t.TempDir(), "cri.sock"), fakecri.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	sbs, cts := fakecri.Generate(spec)
	srv.SetPopulation(sbs, cts)
	r, err := cri.NewRemover(cri.Config{Endpoint: srv.Endpoint(), MaxRecvBytes: 256 << 20, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return srv, r, sbs, cts
}

// The gc client removes, and still may not stop, create or exec anything.
func TestRemoverAllowList(t *testing.T) {
	srv, r, sbs, cts := startRemover(t, fakecri.Spec{Ready: 1, NotReady: 1, Exited: 4})
	ctx := context.Background()
	var exited, notready string
	for _, c := range cts {
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			exited = c.Id
		}
	}
	for _, s := range sbs {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			notready = s.Id
		}
	}
	if err := r.RemoveContainer(ctx, exited); err != nil {
		t.Fatal(err)
	}
	inSandbox := 0
	for _, c := range cts {
		if c.PodSandboxId == notready && c.Id != exited {
			inSandbox++
			if err := r.RemoveContainer(ctx, c.Id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.RemoveSandbox(ctx, notready); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls("RemoveContainer"); n != int64(1+inSandbox) || srv.Calls("RemovePodSandbox") != 1 {
		t.Errorf("removals reached the server %d, %d times, want %d, 1", n, srv.Calls("RemovePodSandbox"), 1+inSandbox)
	}
	gotSB, gotCT := srv.Population()
	if len(gotSB) != len(sbs)-1 || len(gotCT) != len(cts)-1-inSandbox {
		t.Errorf("after the removals: %d sandboxes, %d containers (had %d, %d)", len(gotSB), len(gotCT), len(sbs), len(cts))
	}

	rs := runtimeapi.NewRuntimeServiceClient(r.Conn())
	for name, call := range map[string]func() error{
		"StopPodSandbox": func() error {
			_, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sbs[0].Id})
			return err
		},
		"StopContainer": func() error {
			_, err := rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cts[0].Id})
			return err
		},
		"CreateContainer": func() error {
			_, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sbs[0].Id})
			return err
		},
		"ExecSync": func() error {
			_, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: cts[0].Id, Cmd: []string{"true"}})
			return err
		},
		"UpdateRuntimeConfig": func() error {
			_, err := rs.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{})
			return err
		},
	} {
		err := call()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: err = %v, want PermissionDenied", name, err)
		}
		if n := srv.Calls(name); n != 0 {
			t.Errorf("%s reached the server %d times", name, n)
		}
	}
	for m, want := range map[string]bool{
		runtimeapi.RuntimeService_RemoveContainer_FullMethodName:  true,
		runtimeapi.RuntimeService_RemovePodSandbox_FullMethodName: true,
		runtimeapi.RuntimeService_ListContainers_FullMethodName:   true,
		runtimeapi.RuntimeService_StopPodSandbox_FullMethodName:   false,
		runtimeapi.RuntimeService_Exec_FullMethodName:             false,
	} {
		if cri.AllowedForGC(m) != want {
			t.Errorf("AllowedForGC(%s) = %v, want %v", m, !want, want)
		}
	}
}

// The daemon's client has no remove method and its connection refuses
// both removals before a byte is sent, while the gc client exists.
func TestDaemonClientStillRefusesRemovals(t *testing.T) {
	srv, c, sbs, cts := start(t, fakecri.Options{}, fakecri.Spec{Ready: 1, NotReady: 1, Exited: 3})
	var _ kubecontainer.Runtime = c
	if _, ok := any(c).(kubecontainer.Remover); ok {
		t.Fatal("the daemon's *cri.Client implements Remover")
	}
	rs := runtimeapi.NewRuntimeServiceClient(c.Conn())
	_, err1 := rs.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: cts[0].Id})
	_, err2 := rs.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sbs[0].Id})
	for _, err := range []error{err1, err2} {
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("err = %v, want PermissionDenied", err)
		}
	}
	if srv.Calls("RemoveContainer")+srv.Calls("RemovePodSandbox") != 0 {
		t.Error("a removal reached the runtime through the daemon's client")
	}
	for _, m := range []string{runtimeapi.RuntimeService_RemoveContainer_FullMethodName, runtimeapi.RuntimeService_RemovePodSandbox_FullMethodName} {
		if cri.Allowed(m) {
			t.Errorf("the daemon's allow-list has %s", m)
		}
	}
}

func TestRemoverErrors(t *testing.T) {
	srv, r, sbs, cts := startRemover(t, fakecri.Spec{Ready: 1, NotReady: 1, Exited: 2})
	busy, stuck := cts[0].Id, sbs[1].Id
	srv.FailRemove(status.Error(codes.Internal, "device or resource busy"), busy)
	srv.HangRemove(stuck)
	ctx := context.Background()
	if err := r.RemoveContainer(ctx, "not-there"); !errors.Is(err, kubecontainer.ErrGone) {
		t.Errorf("NotFound: err = %v, want ErrGone", err)
	}
	err := r.RemoveContainer(ctx, busy)
	if err == nil || errors.Is(err, kubecontainer.ErrGone) || status.Code(errors.Unwrap(err)) != codes.Internal {
		t.Errorf("busy: err = %v", err)
	}
	// The sandbox still holds a container: left alone before the removal.
	if err := r.RemoveSandbox(ctx, stuck); !errors.Is(err, kubecontainer.ErrChanged) || srv.Calls("RemovePodSandbox") != 0 {
		t.Errorf("sandbox with a container: err = %v, %d removals", err, srv.Calls("RemovePodSandbox"))
	}
	srv.FailRemove(nil, busy)
	for _, c := range cts {
		if c.PodSandboxId == stuck {
			if err := r.RemoveContainer(ctx, c.Id); err != nil {
				t.Fatal(err)
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := r.RemoveSandbox(cctx, stuck); status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
		t.Errorf("hang: err = %v, want DeadlineExceeded", err)
	}
}

// Listed exited, running now: the status call before the removal leaves it
// alone (the runtime would kill it to remove it); a ready sandbox too.
func TestRemoverChecksStateFirst(t *testing.T) {
	srv, r, sbs, cts := startRemover(t, fakecri.Spec{Ready: 1, Running: 1})
	ctx := context.Background()
	if err := r.RemoveContainer(ctx, cts[0].Id); !errors.Is(err, kubecontainer.ErrChanged) {
		t.Errorf("running container: err = %v, want ErrChanged", err)
	}
	if err := r.RemoveSandbox(ctx, sbs[0].Id); !errors.Is(err, kubecontainer.ErrChanged) {
		t.Errorf("ready sandbox: err = %v, want ErrChanged", err)
	}
	if n := srv.Calls("RemoveContainer") + srv.Calls("RemovePodSandbox"); n != 0 {
		t.Errorf("%d removals reached the runtime", n)
	}
	if _, left := srv.Population(); len(left) != 1 {
		t.Errorf("%d containers left, want the running one", len(left))
	}
}
