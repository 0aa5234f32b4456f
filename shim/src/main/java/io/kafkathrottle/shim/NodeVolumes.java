package io.kafkathrottle.shim;

import java.io.IOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The volumes of this node that the shim reports to the service ({@code PUT /nodes/{id}/volumes}):
 * where the node keeps its KRaft metadata log and its data, by Kafka's rules, and what each
 * directory's file store has room for. The layout is read once from the node's configuration; the
 * sizes are read anew for every report.
 *
 * <p>Kafka's rules (KafkaConfig, 4.1): the data log dirs are {@code log.dirs}, else {@code log.dir}
 * (default {@value #KAFKA_DEFAULT_LOG_DIR}); the metadata log lives in {@code metadata.log.dir},
 * else in the first data log dir. A controller-only node keeps nothing but the metadata log, so its
 * other log dirs hold nothing and are not reported.
 */
final class NodeVolumes {
    static final String ROLES_CONFIG = "process.roles";
    static final String METADATA_LOG_DIR_CONFIG = "metadata.log.dir";
    static final String LOG_DIRS_CONFIG = "log.dirs";
    static final String LOG_DIR_CONFIG = "log.dir";
    static final String KAFKA_DEFAULT_LOG_DIR = "/tmp/kafka-logs";
    static final String BROKER = "broker";
    static final String CONTROLLER = "controller";
    static final String DATA = "data";
    static final String METADATA = "metadata";
    /** The contract's bounds on one report. */
    static final int MAX_ENTRIES = 64;
    static final int MAX_BODY_BYTES = 16 * 1024;
    private static final ObjectMapper JSON = new ObjectMapper();

    /** How a directory's file store is found: {@link Files#getFileStore} but for tests. */
    interface StoreLookup {
        FileStore storeOf(Path directory) throws IOException;
    }

    /** One configured directory and what Kafka keeps in it. */
    record Directory(Path path, boolean metadata, boolean data) {
    }

    /**
     * One report: its JSON body, and the directories left out because they could not be read or did not fit. Per
     * directory of {@link #directories} (same index): its file store (null: unreadable), total and usable bytes (-1:
     * unreadable) and whether it holds data (a metadata dir on a data dir's file store does), which the shim samples
     * between reports ({@link #sample}).
     */
    record Report(byte[] body, int entries, Set<Path> unreadable, int leftOut, FileStore[] stores, long[] totals, long[] usables,
            boolean[] holdsData) {
    }

    final Set<String> roles; // sorted
    final List<Directory> directories; // the metadata dir first, then the data dirs as configured

    NodeVolumes(Set<String> roles, List<Directory> directories) {
        this.roles = Set.copyOf(roles);
        this.directories = List.copyOf(directories);
    }

    /** The layout from the node's configuration (the settings Kafka passes to the callback). */
    static NodeVolumes fromNodeConfig(Map<String, ?> configs) {
        Set<String> roles = new TreeSet<>(list(configs.get(ROLES_CONFIG)));
        if (roles.isEmpty()) {
            roles.add(BROKER); // Kafka 4 requires process.roles; an older layout is a broker's
        }
        boolean broker = roles.contains(BROKER);
        List<String> dataDirs = list(configs.get(LOG_DIRS_CONFIG));
        if (dataDirs.isEmpty()) {
            List<String> single = list(configs.get(LOG_DIR_CONFIG));
            dataDirs = single.isEmpty() ? List.of(KAFKA_DEFAULT_LOG_DIR) : single;
        }
        List<String> metadataDirs = list(configs.get(METADATA_LOG_DIR_CONFIG));
        Path metadata = absolute(metadataDirs.isEmpty() ? dataDirs.get(0) : metadataDirs.get(0));
        Set<Path> data = new LinkedHashSet<>();
        for (String dir : dataDirs) {
            data.add(absolute(dir));
        }
        List<Directory> directories = new ArrayList<>();
        directories.add(new Directory(metadata, true, broker && data.contains(metadata)));
        if (broker) {
            for (Path dir : data) {
                if (!dir.equals(metadata)) {
                    directories.add(new Directory(dir, false, true));
                }
            }
        }
        return new NodeVolumes(roles, directories);
    }

    /**
     * This node's report now: each directory's file store, total and usable bytes, and what it
     * holds; a metadata dir on the same file store as a data dir holds data too. A directory whose
     * store cannot be read is left out (never reported with made-up numbers), and so are entries
     * past {@value #MAX_ENTRIES} or past {@value #MAX_BODY_BYTES} bytes of body.
     */
    Report measure(StoreLookup lookup) {
        Set<Path> unreadable = new TreeSet<>();
        List<Directory> readable = new ArrayList<>();
        List<FileStore> stores = new ArrayList<>();
        List<long[]> sizes = new ArrayList<>();
        int count = directories.size();
        FileStore[] storeOf = new FileStore[count];
        long[] totals = new long[count];
        long[] usables = new long[count];
        boolean[] holdsData = new boolean[count];
        for (int d = 0; d < count; d++) {
            Directory directory = directories.get(d);
            totals[d] = -1;
            usables[d] = -1;
            try {
                FileStore store = lookup.storeOf(directory.path());
                long total = store.getTotalSpace();
                long usable = store.getUsableSpace();
                readable.add(directory);
                stores.add(store);
                sizes.add(new long[] {total, usable});
                storeOf[d] = store;
                totals[d] = total;
                usables[d] = usable;
            } catch (IOException | RuntimeException e) {
                unreadable.add(directory.path());
            }
        }
        for (int i = 0; i < readable.size(); i++) {
            Directory directory = readable.get(i);
            holdsData[directories.indexOf(directory)] = directory.data() || directory.metadata() && sharesStoreWithData(i, readable, stores);
        }
        ObjectNode body = JSON.createObjectNode();
        ArrayNode roleNames = body.putArray("roles");
        roles.stream().sorted().forEach(roleNames::add);
        ArrayNode volumes = body.putArray("volumes");
        for (int i = 0; i < readable.size() && i < MAX_ENTRIES; i++) {
            Directory directory = readable.get(i);
            boolean data = directory.data() || directory.metadata() && sharesStoreWithData(i, readable, stores);
            ObjectNode volume = volumes.addObject();
            volume.put("log_dir", directory.path().toString());
            volume.put("total_bytes", sizes.get(i)[0]);
            volume.put("usable_bytes", sizes.get(i)[1]);
            ArrayNode holds = volume.putArray("holds");
            if (data) {
                holds.add(DATA);
            }
            if (directory.metadata()) {
                holds.add(METADATA);
            }
        }
        byte[] bytes = bytes(body);
        while (bytes.length > MAX_BODY_BYTES && !volumes.isEmpty()) {
            volumes.remove(volumes.size() - 1); // very long paths: the metadata dir comes first and stays
            bytes = bytes(body);
        }
        int entries = volumes.size();
        return new Report(bytes, entries, unreadable, readable.size() - entries, storeOf, totals, usables, holdsData);
    }

    /**
     * Reads the usable bytes of the file stores a report found ({@code stores}, per directory; null: not read) into
     * {@code usables} (-1 when a store cannot be read now): one statvfs each, no lookup and nothing kept. The totals are
     * the report's (a volume's size changes only when it is resized, which the next report carries).
     */
    static void sample(FileStore[] stores, long[] usables) {
        for (int d = 0; d < stores.length; d++) {
            FileStore store = stores[d];
            long usable = -1;
            if (store != null) {
                try {
                    usable = store.getUsableSpace();
                } catch (IOException | RuntimeException e) {
                    usable = -1;
                }
            }
            usables[d] = usable;
        }
    }

    /** Whether the metadata dir at {@code index} lies on the file store of one of the data dirs (same volume). */
    private static boolean sharesStoreWithData(int index, List<Directory> readable, List<FileStore> stores) {
        for (int j = 0; j < readable.size(); j++) {
            if (j != index && readable.get(j).data() && stores.get(j).equals(stores.get(index))) {
                return true;
            }
        }
        return false;
    }

    private static byte[] bytes(ObjectNode body) {
        try {
            return JSON.writeValueAsBytes(body);
        } catch (IOException e) {
            throw new IllegalStateException("cannot write a volume report", e);
        }
    }

    /** A comma-separated setting (Kafka's LIST type), as a properties file or a parsed config gives it. */
    private static List<String> list(Object value) {
        List<String> items = new ArrayList<>();
        if (value == null) {
            return items;
        }
        Collection<?> parts = value instanceof Collection<?> collection ? collection : List.of(value.toString().split(","));
        for (Object part : parts) {
            String item = String.valueOf(part).trim();
            if (!item.isEmpty()) {
                items.add(item);
            }
        }
        return items;
    }

    private static Path absolute(String dir) {
        try {
            return Path.of(dir).toAbsolutePath().normalize();
        } catch (InvalidPathException e) {
            throw new org.apache.kafka.common.config.ConfigException(LOG_DIRS_CONFIG, dir, "not a path the shim can report");
        }
    }
}
