package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** What a node reports of its volumes: Kafka's rules for where the metadata log and the data live, and the contract's bounds. */
class NodeVolumesTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Each top folder (/meta, /data1 ...) is a volume of its own; its size is given by its name's length, usable a quarter. */
    private static FileStore byTopFolder(Path directory) throws IOException {
        String top = directory.getName(0).toString();
        if (top.startsWith("unreadable")) {
            throw new IOException("no such file");
        }
        return new MutableStore(top, 1_000_000L * top.length(), 250_000L * top.length()); // one per name: dirs under a top folder share it
    }

    private static JsonNode report(Map<String, Object> configs) throws IOException {
        return JSON.readTree(NodeVolumes.fromNodeConfig(configs).measure(NodeVolumesTest::byTopFolder).body());
    }

    private static List<String> strings(JsonNode array) {
        List<String> values = new ArrayList<>();
        array.forEach(value -> values.add(value.asText()));
        return values;
    }

    private static Map<String, List<String>> holdsByDir(JsonNode report) {
        Map<String, List<String>> holds = new HashMap<>();
        report.get("volumes").forEach(volume -> holds.put(volume.get("log_dir").asText(), strings(volume.get("holds"))));
        return holds;
    }

    @Test
    void aBrokerWithItsOwnMetadataDirReportsItAsMetadataAndEachDataDirAsData() throws IOException {
        JsonNode report = report(Map.of("process.roles", "broker", "metadata.log.dir", "/meta/kraft", "log.dirs", "/data1/kafka, /data2/kafka"));
        assertEquals(List.of("broker"), strings(report.get("roles")));
        assertEquals(Map.of("/meta/kraft", List.of("metadata"), "/data1/kafka", List.of("data"), "/data2/kafka", List.of("data")),
                holdsByDir(report));
        JsonNode metadata = report.get("volumes").get(0);
        assertEquals("/meta/kraft", metadata.get("log_dir").asText(), "the metadata dir comes first");
        assertEquals(4_000_000L, metadata.get("total_bytes").asLong());
        assertEquals(1_000_000L, metadata.get("usable_bytes").asLong());
    }

    @Test
    void aControllerOnlyNodeKeepsItsMetadataLogInItsFirstLogDirAndReportsNothingElse() throws IOException {
        JsonNode report = report(Map.of("process.roles", "controller", "log.dirs", "/meta/c1,/data1/unused"));
        assertEquals(List.of("controller"), strings(report.get("roles")));
        assertEquals(Map.of("/meta/c1", List.of("metadata")), holdsByDir(report));
    }

    @Test
    void aCombinedNodeWithoutMetadataLogDirKeepsBothInItsFirstLogDir() throws IOException {
        JsonNode report = report(Map.of("process.roles", "controller,broker", "log.dirs", "/data1/k,/data2/k"));
        assertEquals(List.of("broker", "controller"), strings(report.get("roles")), "sorted");
        assertEquals(Map.of("/data1/k", List.of("data", "metadata"), "/data2/k", List.of("data")), holdsByDir(report));
    }

    @Test
    void aMetadataDirOnTheSameFileStoreAsADataDirHoldsDataToo() throws IOException {
        JsonNode report = report(Map.of("process.roles", "broker", "metadata.log.dir", "/data1/kraft", "log.dirs", "/data1/kafka,/data2/kafka"));
        assertEquals(Map.of("/data1/kraft", List.of("data", "metadata"), "/data1/kafka", List.of("data"), "/data2/kafka", List.of("data")),
                holdsByDir(report));
    }

    @Test
    void aControllerOnlyNodesMetadataDirBesideAnUnusedLogDirHoldsOnlyMetadata() throws IOException {
        // A controller keeps no data, so sharing a volume with its other log dirs makes no produce to throttle.
        JsonNode report = report(Map.of("process.roles", "controller", "metadata.log.dir", "/data1/kraft", "log.dirs", "/data1/kafka"));
        assertEquals(Map.of("/data1/kraft", List.of("metadata")), holdsByDir(report));
    }

    @Test
    void kafkasDefaultsApplyWhenNoDirIsConfigured() throws IOException {
        assertEquals(Map.of("/tmp/kafka-logs", List.of("data", "metadata")), holdsByDir(report(Map.of("process.roles", "broker"))));
        assertEquals(Map.of("/data1/one", List.of("data", "metadata")),
                holdsByDir(report(Map.of("process.roles", "broker", "log.dir", "/data1/one"))), "log.dir when log.dirs is unset");
        assertEquals(Map.of("/data1/a", List.of("data", "metadata")),
                holdsByDir(report(Map.of("process.roles", "broker", "log.dirs", List.of("/data1/a")))), "a parsed list, as well as a string");
    }

    @Test
    void onRealDirectoriesTheSizesAreTheFileStoresAndTwoDirsOfOneVolumeShareIt(@TempDir Path temp) throws IOException {
        Path metadata = Files.createDirectory(temp.resolve("meta"));
        Path data = Files.createDirectory(temp.resolve("data"));
        NodeVolumes volumes = NodeVolumes.fromNodeConfig(Map.of("process.roles", "broker,controller", "metadata.log.dir", metadata.toString(),
                "log.dirs", data.toString()));
        JsonNode report = JSON.readTree(volumes.measure(Files::getFileStore).body());
        FileStore store = Files.getFileStore(temp);
        JsonNode first = report.get("volumes").get(0);
        assertEquals(metadata.toString(), first.get("log_dir").asText());
        assertEquals(store.getTotalSpace(), first.get("total_bytes").asLong());
        assertTrue(Math.abs(store.getUsableSpace() - first.get("usable_bytes").asLong()) < 64L << 20, "usable bytes of the same store");
        assertEquals(List.of("data", "metadata"), strings(first.get("holds")), "the same volume as the data dir");
    }

    @Test
    void aDirectoryThatCannotBeReadIsLeftOutNotReportedWithMadeUpNumbers() throws IOException {
        NodeVolumes volumes = NodeVolumes.fromNodeConfig(Map.of("process.roles", "broker", "metadata.log.dir", "/unreadable/kraft",
                "log.dirs", "/data1/k"));
        NodeVolumes.Report report = volumes.measure(NodeVolumesTest::byTopFolder);
        assertEquals(Set.of(Path.of("/unreadable/kraft")), report.unreadable());
        assertEquals(Map.of("/data1/k", List.of("data")), holdsByDir(JSON.readTree(report.body())));
    }

    @Test
    void aReportHoldsAtMost64EntriesAnd16KiB() throws IOException {
        List<String> many = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            many.add("/data" + i + "/k");
        }
        NodeVolumes.Report report = NodeVolumes.fromNodeConfig(Map.of("process.roles", "broker", "metadata.log.dir", "/meta/k",
                "log.dirs", String.join(",", many))).measure(NodeVolumesTest::byTopFolder);
        assertEquals(64, report.entries());
        assertEquals(64, JSON.readTree(report.body()).get("volumes").size());
        assertEquals(101 - 64, report.leftOut());

        String longName = "x".repeat(1000);
        List<String> long20 = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            long20.add("/data" + i + "/" + longName);
        }
        NodeVolumes.Report big = NodeVolumes.fromNodeConfig(Map.of("process.roles", "broker", "metadata.log.dir", "/meta/k",
                "log.dirs", String.join(",", long20))).measure(NodeVolumesTest::byTopFolder);
        assertTrue(big.body().length <= NodeVolumes.MAX_BODY_BYTES, "body " + big.body().length + " bytes");
        JsonNode parsed = JSON.readTree(big.body());
        assertEquals(big.entries(), parsed.get("volumes").size());
        assertTrue(big.entries() >= 10 && big.entries() < 21, big.entries() + " entries");
        assertEquals("/meta/k", parsed.get("volumes").get(0).get("log_dir").asText(), "the metadata dir is kept");
    }
}
