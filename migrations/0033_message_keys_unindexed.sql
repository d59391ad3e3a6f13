-- A message key is no longer indexed. `messages_key` held every key again, with its document
-- (about 0.35 × the text of LoCoMo-shaped turns, 0.14 × of coding sessions), yet every statement
-- of cwa reads a document's messages through the primary key (document_row, ordinal): a search's
-- visible-key filter, hint sources and the browse page all know the document first. Admission
-- refuses a document that names a key twice (`duplicate-key`, cwa/store/serialization.py), the
-- rule the unique index also enforced. SQL that finds a message by its key alone now reads every
-- message (docs/schema.md).
DROP INDEX messages_key;
