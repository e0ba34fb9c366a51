package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Deleting an upload deletes its deployed image rows with it.
func TestDeleteRemovesImages(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*sqlStore)
	count := func() int {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM upload_images`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var ids []uuid.UUID
	for range 2 {
		u, err := s.Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkForProcessing(ctx, u.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.Claim(ctx, "w", time.Minute); !ok || err != nil {
			t.Fatalf("claim = %v %v", ok, err)
		}
		if err := s.RecordFile(ctx, u.ID, "w", 0, nil, []DeployedImage{{File: "a.tar", Name: "n1"}, {File: "a.tar", Name: "n2"}}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, u.ID, "w"); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	if n := count(); n != 4 {
		t.Fatalf("%d image rows written, want 4", n)
	}
	if err := s.Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("after deleting one upload %d image rows, want the other's 2", n)
	}
	if got, total, err := s.Images(ctx, ids[1], 10, 0); err != nil || total != 2 || len(got) != 2 {
		t.Fatalf("other upload's images = %v %d %v", got, total, err)
	}
}
