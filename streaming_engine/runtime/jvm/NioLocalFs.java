package io.streamingengine.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * {@code fs.AbstractFileSystem.file.impl} (FileContext, used by Delta's log
 * store and Spark's checkpoint files): Hadoop's LocalFs, checksummed, over
 * {@link NioRawLocalFileSystem}. Mirrors org.apache.hadoop.fs.local.LocalFs
 * and RawLocalFs, whose constructors are package-private.
 */
public class NioLocalFs extends ChecksumFs {
  public NioLocalFs(URI theUri, Configuration conf) throws IOException, URISyntaxException {
    super(new Raw(conf));
  }

  /** Mirrors org.apache.hadoop.fs.local.RawLocalFs. */
  public static class Raw extends DelegateToFileSystem {
    public Raw(Configuration conf) throws IOException, URISyntaxException {
      super(FsConstants.LOCAL_FS_URI, new NioRawLocalFileSystem(), conf,
          FsConstants.LOCAL_FS_URI.getScheme(), false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    @Deprecated
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true;
    }
  }
}
