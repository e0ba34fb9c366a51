-- The address last handed out from each subnet's pool: the next lease starts
-- after it and wraps around, as Podman's IPAM does, so an address just
-- released (a stopped or checkpointed container's) is not handed to the
-- next container at once.
CREATE TABLE network_last_leases (
	network_id TEXT NOT NULL REFERENCES networks(id) ON DELETE CASCADE,
	subnet     TEXT NOT NULL,
	ip         TEXT NOT NULL,
	PRIMARY KEY (network_id, subnet)
);
