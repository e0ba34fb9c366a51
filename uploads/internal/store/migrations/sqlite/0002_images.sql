CREATE TABLE upload_images (
    upload_id TEXT    NOT NULL,
    seq       INTEGER NOT NULL,
    ordinal   INTEGER NOT NULL,
    file      TEXT    NOT NULL,
    name      TEXT    NOT NULL,
    PRIMARY KEY (upload_id, seq, ordinal)
);
ALTER TABLE uploads ADD COLUMN image_count INTEGER NOT NULL DEFAULT 0;
