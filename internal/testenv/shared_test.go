package testenv

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func useSharedRecord(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	old := sharedRecord
	sharedRecord = filepath.Join(dir, "ledger", "shared-paths.json")
	t.Cleanup(func() { sharedRecord = old })
	return dir
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// Two daemons at once, as the integration tests and another package's
// tests run them: the first creates a shared path, the second uses it and
// stops last. A record per daemon left it behind (the first found it in
// use, the second had found it there); the shared record removes it when
// the last one stops, and never a path that was there before.
func TestSharedPathsGoWithTheLastDaemon(t *testing.T) {
	dir := useSharedRecord(t)
	run := filepath.Join(dir, "run")
	before := filepath.Join(dir, "run", "before") // the host had it
	for _, d := range []string{run, before} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shims := filepath.Join(run, "containerd")      // both daemons use it
	cni := filepath.Join(dir, "var", "lib", "cni") // only the first
	// The first daemon starts and creates both.
	if err := claimShared(shims, cni, before); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(shims, "s"), cni} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The second starts: nothing is missing, nothing new to record.
	if err := claimShared(shims); err != nil {
		t.Fatal(err)
	}
	got, err := loadShared()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{shims, filepath.Join(dir, "var")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("record = %v, want %v (the topmost directory each creates; not what existed)", got, want)
	}
	sock := filepath.Join(shims, "s", "second.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The first stops: the CNI cache goes, the shims' directory is in use.
	kept, err := releaseShared()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{shims}; !reflect.DeepEqual(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if exists(filepath.Join(dir, "var")) || !exists(sock) {
		t.Fatalf("after the first stopped: var exists %t, the second's socket exists %t", exists(filepath.Join(dir, "var")), exists(sock))
	}
	// The second stops (its shim's socket gone): everything goes, with the
	// record; what the host had stays.
	os.Remove(sock)
	if kept, err = releaseShared(); err != nil || len(kept) > 0 {
		t.Fatalf("kept %v, %v; want nothing", kept, err)
	}
	if exists(shims) || exists(sharedRecord) {
		t.Errorf("after the last stopped: %s exists %t, the record exists %t", shims, exists(shims), exists(sharedRecord))
	}
	if !exists(before) {
		t.Errorf("%s was there before and is gone", before)
	}
}

func TestSharedRecordUnreadableIsAnError(t *testing.T) {
	useSharedRecord(t)
	if err := os.MkdirAll(filepath.Dir(sharedRecord), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sharedRecord, []byte("{not a list"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := releaseShared(); err == nil || !strings.Contains(err.Error(), sharedRecord) {
		t.Errorf("releaseShared on a bad record = %v, want an error naming it", err)
	}
	if err := claimShared(filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("claimShared on a bad record: no error")
	}
	if b, _ := os.ReadFile(sharedRecord); string(b) != "{not a list" {
		t.Errorf("the bad record was overwritten: %q", b)
	}
}
