// A consistent copy of a data directory's SQLite journal for readers that
// must not disturb it (`gpupool sim replay`, issue 20).
//
// The copy goes through SQLite's online backup API from a read-only
// connection, in one read transaction: it sees one committed state, never a
// half-written batch, and takes no lock a running server holds (in WAL mode
// a reader neither blocks the writer nor waits for it; the directory's LOCK
// file is not touched).
//
// Nothing in the source directory is written:
//  - with the server running (its -wal and -shm are there), the copy reads
//    through them like any other reader;
//  - with no -wal and no -shm (the server stopped cleanly, which folds the
//    WAL back in and removes both), the database is opened immutable, so
//    that SQLite creates neither file; if a -wal appears meanwhile (a server
//    started), the copy is taken again through the WAL.
// A -wal left by a server that died is read through (a read-only connection
// may then rebuild the -shm index, which holds no data).
//
// Thread-safety: no shared state; call from any thread.
#pragma once

#include <string>

#include "src/base/status.h"

namespace gpupool {

// Copies DIR/gpupool.db (with what its WAL holds) to `dest_path`, a new
// file (replaced if it exists). Fails with kNotFound naming the path when
// DIR/gpupool.db does not exist, kDataLoss naming it when it is not an
// SQLite database, kIoError otherwise.
Status CopySqliteJournal(const std::string& dir, const std::string& dest_path);

}  // namespace gpupool
