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
		for _, table := range []string{"network_leases", "network_last_leases"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE network_id = ?`, id); err != nil {
				return fmt.Errorf("delete leases of network %s: %w", id, err)
			}
		}
		return changeRow(ctx, tx, "delete", "network "+id, `DELETE FROM networks WHERE id = ?`, id)
	})
}

// Lease is what a lease's pick answers: the addresses to take, and, by
// subnet, the address each subnet's pool handed out (Last: the next pick
// from that pool starts after it; static addresses are not in it).
type Lease struct {
	IPs  []string
	Last map[string]string
}

// LeaseAddresses hands addresses of a network to a container in one
// transaction: pick gets the addresses in use on the network and, by subnet,
// the address each pool handed out last, and answers the ones to take; an
// address taken meanwhile fails the whole lease with ErrDuplicate, so no
// address is ever handed out twice.
func (s *DB) LeaseAddresses(ctx context.Context, networkID, containerID string, pick func(used map[string]bool, last map[string]string) (Lease, error)) ([]string, error) {
	var taken []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		used := map[string]bool{}
		if err := queryTx(ctx, tx, "leases of network "+networkID, func(rows *sql.Rows) error {
			var ip string
			err := rows.Scan(&ip)
			used[ip] = true
			return err
		}, `SELECT ip FROM network_leases WHERE network_id = ?`, networkID); err != nil {
			return err
		}
		last := map[string]string{}
		if err := queryTx(ctx, tx, "last leases of network "+networkID, func(rows *sql.Rows) error {
			var subnet, ip string
			err := rows.Scan(&subnet, &ip)
			last[subnet] = ip
			return err
		}, `SELECT subnet, ip FROM network_last_leases WHERE network_id = ?`, networkID); err != nil {
			return err
		}
		lease, err := pick(used, last)
		if err != nil {
			return err
		}
		for _, ip := range lease.IPs {
			_, err := tx.ExecContext(ctx, `INSERT INTO network_leases (network_id, ip, container_id) VALUES (?, ?, ?)`,
				networkID, ip, containerID)
			if isConstraint(err) {
				return fmt.Errorf("address %s on network %s: %w", ip, networkID, ErrDuplicate)
			}
			if err != nil {
				return fmt.Errorf("lease %s on network %s: %w", ip, networkID, err)
			}
		}
		for subnet, ip := range lease.Last {
			if _, err := tx.ExecContext(ctx, `INSERT INTO network_last_leases (network_id, subnet, ip) VALUES (?, ?, ?)
				ON CONFLICT (network_id, subnet) DO UPDATE SET ip = excluded.ip`, networkID, subnet, ip); err != nil {
				return fmt.Errorf("note the last lease of subnet %s on network %s: %w", subnet, networkID, err)
			}
		}
		taken = lease.IPs
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
