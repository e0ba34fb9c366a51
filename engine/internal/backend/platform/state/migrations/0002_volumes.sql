CREATE TABLE volumes (
	name       TEXT PRIMARY KEY,
	created    INTEGER NOT NULL,
	data       BLOB NOT NULL
);
