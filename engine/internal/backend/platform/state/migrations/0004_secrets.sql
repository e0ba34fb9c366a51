CREATE TABLE secrets (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	created    INTEGER NOT NULL,
	data       BLOB NOT NULL
);
