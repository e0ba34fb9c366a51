CREATE TABLE pods (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	created    INTEGER NOT NULL,
	data       BLOB NOT NULL
);

ALTER TABLE containers ADD COLUMN pod_id TEXT NOT NULL DEFAULT '';
CREATE INDEX containers_pod ON containers(pod_id);
