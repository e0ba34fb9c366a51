package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// QuadletActivation is the record of one activated quadlet: its status
// (the activator's words: activating, active, removing), whether the
// activation came with the unit's install (a failed or interrupted one
// removes the unit too), and the engine objects it created, in order.
type QuadletActivation struct {
	Name     string
	Status   string
	OwnsUnit bool
	// ActivatedBy is the quadlet whose activation activated this one as
	// a dependency, until that activation finished ("" for none).
	ActivatedBy string
	Created     time.Time
	Objects     []QuadletObject
}

// QuadletObject is one engine object an activation created (or was about
// to create: it is recorded first): its kind and name.
type QuadletObject struct {
	Kind   string
	Object string
}

// BeginQuadletActivation records that quadlet name is being activated;
// ErrDuplicate when it has a record already.
func (s *DB) BeginQuadletActivation(ctx context.Context, r QuadletActivation) error {
	return s.insertRow(ctx, "quadlet activation "+r.Name, `INSERT INTO quadlet_activations (name, status, owns_unit, activated_by, created) VALUES (?, ?, ?, ?, ?)`,
		r.Name, r.Status, r.OwnsUnit, r.ActivatedBy, time.Now().UnixNano())
}

// AddQuadletObject appends an object to quadlet name's record.
func (s *DB) AddQuadletObject(ctx context.Context, name string, obj QuadletObject) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO quadlet_objects (quadlet, seq, kind, object)
			SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ? FROM quadlet_objects WHERE quadlet = ?`,
			name, obj.Kind, obj.Object, name)
		if err != nil {
			return fmt.Errorf("record object of quadlet %s: %w", name, err)
		}
		return nil
	})
}

// SetQuadletStatus changes the status of quadlet name's record.
func (s *DB) SetQuadletStatus(ctx context.Context, name, status string) error {
	return s.changeRowTx(ctx, "update", "quadlet activation "+name, `UPDATE quadlet_activations SET status = ? WHERE name = ?`, status, name)
}

// ReleaseQuadletDependencies ends the tie of the quadlets activated as
// dependencies of owner, once owner's activation finished.
func (s *DB) ReleaseQuadletDependencies(ctx context.Context, owner string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE quadlet_activations SET activated_by = '' WHERE activated_by = ?`, owner); err != nil {
			return fmt.Errorf("release dependencies of quadlet %s: %w", owner, err)
		}
		return nil
	})
}

// RemoveQuadletActivation deletes quadlet name's record and its objects.
func (s *DB) RemoveQuadletActivation(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM quadlet_activations WHERE name = ?`, name); err != nil {
			return fmt.Errorf("delete quadlet activation %s: %w", name, err)
		}
		return nil
	})
}

// QuadletActivations returns every activation record with its objects,
// oldest first.
func (s *DB) QuadletActivations(ctx context.Context) ([]QuadletActivation, error) {
	out, err := listRows(ctx, s, "quadlet activations", func(a *QuadletActivation) []any {
		return []any{&a.Name, &a.Status, &a.OwnsUnit, &a.ActivatedBy, unixNano{&a.Created}}
	}, `SELECT name, status, owns_unit, activated_by, created FROM quadlet_activations ORDER BY created, name`)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	for i, a := range out {
		index[a.Name] = i
	}
	type quadletObjectRow struct {
		quadlet string
		QuadletObject
	}
	objs, err := listRows(ctx, s, "quadlet objects", func(o *quadletObjectRow) []any {
		return []any{&o.quadlet, &o.Kind, &o.Object}
	}, `SELECT quadlet, kind, object FROM quadlet_objects ORDER BY quadlet, seq`)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if i, ok := index[o.quadlet]; ok {
			out[i].Objects = append(out[i].Objects, o.QuadletObject)
		}
	}
	return out, nil
}
