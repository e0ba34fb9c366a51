CREATE TABLE container_exit_codes (
	id         TEXT PRIMARY KEY,
	exit_code  INTEGER NOT NULL,
	removed    INTEGER NOT NULL
);
CREATE INDEX container_exit_codes_removed ON container_exit_codes(removed);
