package state

import (
	"context"
	"database/sql"
	"fmt"
)

// NetworkRecord is one row of the networks table. Data is the network's
// full record as the caller serialises it.
type NetworkRecord = NamedRecord

// Networks is the networks table: Add, Update and List as for every
// table of named objects (RemoveNetwork takes the leases with it).
func (s *DB) Networks() NamedTable {
	return NamedTable{db: s, table: "networks", kind: "network"}
}

// RemoveNetwork deletes a network's record and its leases.
func (s *DB) RemoveNetwork(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM network_leases WHERE network_id = ?`, id); err != nil {
			return fmt.Errorf("delete leases of network %s: %w", id, err)
		}
		return changeRow(ctx, tx, "delete", "network "+id, `DELETE FROM networks WHERE id = ?`, id)
	})
}

// LeaseAddresses hands addresses of a network to a container in one
// transaction: pick gets the addresses in use on the network and answers the
// ones to take; an address taken meanwhile fails the whole lease with
// ErrDuplicate, so no address is ever handed out twice.
func (s *DB) LeaseAddresses(ctx context.Context, networkID, containerID string, pick func(used map[string]bool) ([]string, error)) ([]string, error) {
	var taken []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT ip FROM network_leases WHERE network_id = ?`, networkID)
		if err != nil {
			return fmt.Errorf("read leases of network %s: %w", networkID, err)
		}
		used := map[string]bool{}
		for rows.Next() {
			var ip string
			if err := rows.Scan(&ip); err != nil {
				rows.Close()
				return err
			}
			used[ip] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		ips, err := pick(used)
		if err != nil {
			return err
		}
		for _, ip := range ips {
			_, err := tx.ExecContext(ctx, `INSERT INTO network_leases (network_id, ip, container_id) VALUES (?, ?, ?)`,
				networkID, ip, containerID)
			if isConstraint(err) {
				return fmt.Errorf("address %s on network %s: %w", ip, networkID, ErrDuplicate)
			}
			if err != nil {
				return fmt.Errorf("lease %s on network %s: %w", ip, networkID, err)
			}
		}
		taken = ips
		return nil
	})
	return taken, err
}

// ReleaseAddresses frees a container's addresses on one network, or on every
// network when networkID is empty.
func (s *DB) ReleaseAddresses(ctx context.Context, networkID, containerID string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if networkID == "" {
			_, err = tx.ExecContext(ctx, `DELETE FROM network_leases WHERE container_id = ?`, containerID)
		} else {
			_, err = tx.ExecContext(ctx, `DELETE FROM network_leases WHERE network_id = ? AND container_id = ?`, networkID, containerID)
		}
		if err != nil {
			return fmt.Errorf("release addresses of container %s: %w", containerID, err)
		}
		return nil
	})
}

// LeasedAddresses returns the addresses containerID holds, by network ID.
func (s *DB) LeasedAddresses(ctx context.Context, containerID string) (map[string][]string, error) {
	type lease struct{ network, ip string }
	rows, err := listRows(ctx, s, "leases of container "+containerID, func(l *lease) []any { return []any{&l.network, &l.ip} },
		`SELECT network_id, ip FROM network_leases WHERE container_id = ?`, containerID)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, l := range rows {
		out[l.network] = append(out[l.network], l.ip)
	}
	return out, nil
}

// LeaseHolders returns the IDs of every container holding an address.
func (s *DB) LeaseHolders(ctx context.Context) ([]string, error) {
	return listRows(ctx, s, "lease holders", func(id *string) []any { return []any{id} },
		`SELECT DISTINCT container_id FROM network_leases`)
}
