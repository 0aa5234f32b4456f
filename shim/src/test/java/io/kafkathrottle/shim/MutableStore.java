package io.kafkathrottle.shim;

import java.nio.file.FileStore;
import java.nio.file.attribute.FileAttributeView;
import java.nio.file.attribute.FileStoreAttributeView;
import java.util.concurrent.atomic.AtomicLong;

/** A file store whose usable bytes a test sets, counting how often they are read; stores of the same name are equal. */
final class MutableStore extends FileStore {
    final AtomicLong usable;
    final AtomicLong reads = new AtomicLong();
    private final String name;
    private final long total;

    MutableStore(String name, long total, long usable) {
        this.name = name;
        this.total = total;
        this.usable = new AtomicLong(usable);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String type() {
        return "test";
    }

    @Override
    public boolean isReadOnly() {
        return false;
    }

    @Override
    public long getTotalSpace() {
        return total;
    }

    @Override
    public long getUsableSpace() {
        reads.incrementAndGet();
        return usable.get();
    }

    @Override
    public long getUnallocatedSpace() {
        return usable.get();
    }

    @Override
    public boolean supportsFileAttributeView(Class<? extends FileAttributeView> type) {
        return false;
    }

    @Override
    public boolean supportsFileAttributeView(String attributeView) {
        return false;
    }

    @Override
    public <V extends FileStoreAttributeView> V getFileStoreAttributeView(Class<V> type) {
        return null;
    }

    @Override
    public Object getAttribute(String attribute) {
        return null;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof MutableStore store && store.name.equals(name);
    }

    @Override
    public int hashCode() {
        return name.hashCode();
    }
}
