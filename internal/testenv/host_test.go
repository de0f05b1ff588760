package testenv

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRoutedReadsProcNetRoute(t *testing.T) {
	table := `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	0100000A	0003	0	0	0	00000000	0	0	0
eth0	0000000A	00000000	0001	0	0	0	000000FF	0	0	0
br0	0005FE0A	00000000	0001	0	0	0	00FFFFFF	0	0	0
`
	for _, c := range []struct {
		net  [4]byte
		want bool
	}{
		{[4]byte{10, 254, 5, 0}, true},   // the /24 route
		{[4]byte{10, 254, 6, 0}, true},   // inside 10.0.0.0/8
		{[4]byte{192, 168, 7, 0}, false}, // only the default route covers it
		{[4]byte{172, 17, 0, 0}, false},
	} {
		if got := routed(table, c.net); got != c.want {
			t.Errorf("routed(%v) = %t, want %t", c.net, got, c.want)
		}
	}
}

func TestNotExistingNamesWhatWouldBeCreated(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	got := notExisting(filepath.Join(dir, "a"), filepath.Join(dir, "a", "b", "c"), filepath.Join(dir, "d"))
	want := []string{filepath.Join(dir, "a", "b"), filepath.Join(dir, "d")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("notExisting = %v, want %v", got, want)
	}
}
