CREATE TABLE networks (
	name       TEXT PRIMARY KEY,
	id         TEXT NOT NULL UNIQUE,
	created    INTEGER NOT NULL,
	data       BLOB NOT NULL
);

-- One row per address handed out: no address twice on a network.
CREATE TABLE network_leases (
	network_id   TEXT NOT NULL REFERENCES networks(id) ON DELETE CASCADE,
	ip           TEXT NOT NULL,
	container_id TEXT NOT NULL,
	PRIMARY KEY (network_id, ip)
);
CREATE INDEX network_leases_container ON network_leases(container_id);
