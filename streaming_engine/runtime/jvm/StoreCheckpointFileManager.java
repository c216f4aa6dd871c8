package io.streamingengine.spark;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * The engine's {@code spark.sql.streaming.checkpointFileManagerClass}: how
 * Spark writes its checkpoint (offsets, commits, state) and Delta its
 * {@code .crc} files, on every file system.
 *
 * <p>On a store whose output streams can be aborted (S3A: an object appears,
 * whole, when its stream closes, and never when the stream is aborted) a file
 * is written under its final name, as Spark's
 * {@code AbortableStreamBasedCheckpointFileManager} (spark-hadoop-cloud, not
 * published for this Spark) does: no temporary file and no rename, which on S3
 * is a copy and a delete (about 15 requests per file instead of 3); its other
 * operations (list, open, exists, ...) go through the process's cached
 * FileSystem, as Spark's {@code FileSystemBasedCheckpointFileManager} does.
 * Never through a FileContext there: Hadoop builds a NEW S3AFileSystem (SDK
 * clients, thread pools) for every FileContext, and Delta makes one of these
 * managers per transaction (its checksum writer) - a new S3A client per commit,
 * a sixth of a commit's CPU measured on s3a. Everywhere else Spark's own choice:
 * write a temporary file and rename it (FileContext, else FileSystem).
 */
public final class StoreCheckpointFileManager implements CheckpointFileManager {
    private final CheckpointFileManager renaming;
    private final Configuration conf;
    private final boolean direct;

    public StoreCheckpointFileManager(Path path, Configuration conf) throws Exception {
        this.conf = conf;
        FileSystem fs = path.getFileSystem(conf);
        this.direct = fs.hasPathCapability(path, CommonPathCapabilities.ABORTABLE_STREAM);
        this.renaming = direct ? new FileSystemBasedCheckpointFileManager(path, conf) : sparksChoice(path, conf);
    }

    /** What Spark's {@code CheckpointFileManager.create} picks when no class is configured. */
    private static CheckpointFileManager sparksChoice(Path path, Configuration conf) throws Exception {
        try {
            return new FileContextBasedCheckpointFileManager(path, conf);
        } catch (Exception e) {
            if (e instanceof UnsupportedFileSystemException) {
                return new FileSystemBasedCheckpointFileManager(path, conf);
            }
            throw e;
        }
    }

    @Override
    public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        try {
            FileSystem fs = path.getFileSystem(conf);
            if (!direct || !fs.hasPathCapability(path, CommonPathCapabilities.ABORTABLE_STREAM)) {
                return renaming.createAtomic(path, overwriteIfPossible);
            }
            // fails when the file exists and overwriteIfPossible is false, as the rename would
            return new Direct(fs.create(path, overwriteIfPossible));
        } catch (IOException e) {
            // as thrown (Spark's callers catch FileAlreadyExistsException itself), as Scala code may
            throw StoreCheckpointFileManager.<RuntimeException>sneaky(e);
        }
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> E sneaky(Throwable e) throws E {
        throw (E) e;
    }

    /** A file written under its final name: visible when closed, discarded when cancelled. */
    static final class Direct extends CancellableFSDataOutputStream {
        private final FSDataOutputStream out;
        private boolean done;

        Direct(FSDataOutputStream out) {
            super(out);
            this.out = out;
        }

        @Override
        public synchronized void cancel() {
            if (done) {
                return;
            }
            done = true;
            try {
                out.abort();
            } finally {
                try {
                    out.close();
                } catch (IOException ignored) {
                    // aborted: nothing was published
                }
            }
        }

        @Override
        public synchronized void close() throws IOException {
            if (done) {
                return;
            }
            done = true;
            out.close();
        }
    }

    @Override
    public FSDataInputStream open(Path path) {
        return renaming.open(path);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
        return renaming.list(path, filter);
    }

    @Override
    public void mkdirs(Path path) {
        renaming.mkdirs(path);
    }

    @Override
    public boolean exists(Path path) {
        return renaming.exists(path);
    }

    @Override
    public void delete(Path path) {
        renaming.delete(path);
    }

    @Override
    public boolean isLocal() {
        return renaming.isLocal();
    }

    @Override
    public Path createCheckpointDirectory() {
        return renaming.createCheckpointDirectory();
    }

    @Override
    public void close() {
        renaming.close();
    }

    /** How files are written and what does the rest (diagnostics; a test reads it). */
    @Override
    public String toString() {
        return "StoreCheckpointFileManager(" + (direct ? "direct writes" : "temporary file and rename") + "; "
            + renaming.getClass().getSimpleName() + ")";
    }
}
