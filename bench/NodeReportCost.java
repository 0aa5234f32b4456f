package io.kafkathrottle.shim;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What building one volume report costs a node: the shim's own NodeVolumes (the node's layout
 * from its configuration, then FileStore total/usable of every directory and the JSON body), on
 * real directories. Run by bench/bench_node_reports.py with the shim jar and Kafka's jars.
 *
 * <p>{@code NodeReportCost <base dir> <data dirs> <iterations>}: prints the body's bytes and the
 * median nanoseconds per report over 5 runs of the iterations.
 */
public class NodeReportCost {
    public static void main(String[] args) throws Exception {
        Path base = Path.of(args[0]);
        int dataDirs = Integer.parseInt(args[1]);
        int iterations = Integer.parseInt(args[2]);
        List<String> data = new ArrayList<>();
        for (int i = 0; i < dataDirs; i++) {
            Path dir = Files.createDirectories(base.resolve("kafka-data-" + i));
            data.add(dir.toString());
        }
        Path metadata = Files.createDirectories(base.resolve("kafka-metadata"));
        NodeVolumes volumes = NodeVolumes.fromNodeConfig(Map.of(
                "process.roles", "broker,controller",
                "log.dirs", String.join(",", data),
                "metadata.log.dir", metadata.toString()));
        int bytes = volumes.measure(Files::getFileStore).body().length;
        for (int i = 0; i < iterations; i++) { // warm up the JIT
            volumes.measure(Files::getFileStore);
        }
        long[] runs = new long[5];
        for (int r = 0; r < runs.length; r++) {
            long start = System.nanoTime();
            for (int i = 0; i < iterations; i++) {
                volumes.measure(Files::getFileStore);
            }
            runs[r] = (System.nanoTime() - start) / iterations;
        }
        java.util.Arrays.sort(runs);
        System.out.println(bytes + " " + runs[runs.length / 2]);
    }
}
