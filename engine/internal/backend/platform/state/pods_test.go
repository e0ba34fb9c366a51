package state

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPodsTable(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	now := time.Now()
	if err := db.AddPod(ctx, PodRecord{ID: "p1", Name: "web", Created: now, Data: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddPod(ctx, PodRecord{ID: "p2", Name: "web", Created: now, Data: []byte(`{}`)}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second pod named web: %v, want ErrDuplicate", err)
	}
	if err := db.AddContainer(ctx, ContainerRecord{ID: "c1", Name: "c", State: "configured", Created: now, Data: []byte(`{}`), PodID: "p1"}); err != nil {
		t.Fatal(err)
	}
	var podID string
	if err := db.db.QueryRowContext(ctx, `SELECT pod_id FROM containers WHERE id = 'c1'`).Scan(&podID); err != nil || podID != "p1" {
		t.Fatalf("container pod_id %q, %v", podID, err)
	}
	pods, err := db.ListPods(ctx)
	if err != nil || len(pods) != 1 || pods[0].Name != "web" || string(pods[0].Data) != `{"a":1}` || pods[0].Created.UnixNano() != now.UnixNano() {
		t.Fatalf("ListPods: %+v %v", pods, err)
	}
	if err := db.RemovePod(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := db.RemovePod(ctx, "p1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second removal: %v, want ErrNotFound", err)
	}
}
