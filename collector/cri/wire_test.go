package cri

import (
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/pleg-exporter/pleg_exporter/internal/fakecri"
)

func TestScanListMatchesDecode(t *testing.T) {
	sbs, cts := fakecri.Generate(fakecri.Spec{Ready: 3, NotReady: 2, Created: 4, Running: 5, Exited: 6, Unknown: 7, Namespaces: []string{"a", "bb"}})
	b, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cts})
	perNS := map[string]int{}
	sum := listSummary{namespaces: true, onItem: func(it item) { perNS[string(it.Namespace)]++ }}
	if err := scanList(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Size != len(b) || sum.Items != len(cts) || sum.States != [4]int{4, 5, 6, 7} {
		t.Errorf("containers: size %d/%d items %d states %v", sum.Size, len(b), sum.Items, sum.States)
	}
	want := map[string]int{}
	for _, c := range cts {
		want[c.Labels[namespaceLabel]]++
	}
	if len(perNS) != len(want) || perNS["a"] != want["a"] || perNS["bb"] != want["bb"] {
		t.Errorf("namespaces %v, want %v", perNS, want)
	}
	b, _ = proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: sbs})
	sb := listSummary{sandboxes: true, keepIDs: true}
	if err := scanList(b, &sb); err != nil {
		t.Fatal(err)
	}
	if c := sb.sandboxCounts(); c["ready"] != 3 || c["notready"] != 2 || len(sb.IDs) != 5 || sb.IDs[0] != sbs[0].Id {
		t.Errorf("sandboxes %v ids %v", c, sb.IDs)
	}
}

func FuzzScanList(f *testing.F) {
	_, cts := fakecri.Generate(fakecri.Spec{Ready: 1, Running: 2, Exited: 1})
	b, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cts})
	f.Add(b)
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var sum listSummary
		err := scanList(data, &sum)
		var resp runtimeapi.ListContainersResponse
		if perr := proto.Unmarshal(data, &resp); perr == nil && err == nil && sum.Items != len(resp.Containers) {
			t.Errorf("scanner counted %d, decoder %d", sum.Items, len(resp.Containers))
		}
	})
}
