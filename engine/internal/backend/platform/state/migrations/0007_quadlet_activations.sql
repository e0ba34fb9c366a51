CREATE TABLE quadlet_activations (
	name       TEXT PRIMARY KEY,
	status     TEXT NOT NULL,
	owns_unit  INTEGER NOT NULL,
	activated_by TEXT NOT NULL,
	created    INTEGER NOT NULL
);

CREATE TABLE quadlet_objects (
	quadlet    TEXT NOT NULL REFERENCES quadlet_activations(name) ON DELETE CASCADE,
	seq        INTEGER NOT NULL,
	kind       TEXT NOT NULL,
	object     TEXT NOT NULL,
	PRIMARY KEY (quadlet, seq)
);
