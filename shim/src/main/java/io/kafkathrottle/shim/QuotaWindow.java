package io.kafkathrottle.shim;

import java.util.Map;

import org.apache.kafka.common.config.ConfigException;

/**
 * Kafka's window for byte-rate and request quotas: {@code quota.window.num} samples of
 * {@code quota.window.size.seconds} (11 × 1 s by default, Kafka's QuotaConfig).
 *
 * <p>What Kafka 4.1 does with it (org.apache.kafka.common.metrics.stats.SampledStat and Rate): a
 * sensor keeps the samples it recorded in, one more than configured for the overlap, drops a sample
 * once its last record is {@code samples} windows old, and measures the bytes it holds divided by
 * the time they span, but by no less than {@code samples − 1} windows. A sensor younger than that
 * divides by {@code samples − 1} windows plus the elapsed part of its current sample; a steady
 * one spans between {@code samples} and {@code samples + 1} windows. The shim works with the
 * middle of each range.
 */
record QuotaWindow(int samples, long sampleNanos) {
    static final String SAMPLES_CONFIG = "quota.window.num";
    static final String SIZE_CONFIG = "quota.window.size.seconds";
    static final QuotaWindow KAFKA_DEFAULT = new QuotaWindow(11, 1_000_000_000L);

    QuotaWindow {
        if (samples < 1 || sampleNanos <= 0) {
            throw new IllegalArgumentException("a quota window needs at least one sample of a positive length");
        }
    }

    /** The broker's own settings (Kafka validated them), else Kafka's defaults. */
    static QuotaWindow fromBrokerConfig(Map<String, ?> configs) {
        int samples = intSetting(configs, SAMPLES_CONFIG, KAFKA_DEFAULT.samples);
        int seconds = intSetting(configs, SIZE_CONFIG, (int) (KAFKA_DEFAULT.sampleNanos / 1_000_000_000L));
        return new QuotaWindow(samples, seconds * 1_000_000_000L);
    }

    /**
     * What Kafka's Rate divides by, about, for a sensor that began recording {@code ageNanos} ago.
     * Until a whole span has passed it holds every byte since it began and divides by its age (no
     * less than the young minimum); then by the steady middle.
     */
    long divisorNanos(long ageNanos) {
        long young = (2L * samples - 1) * sampleNanos / 2;
        long steady = (2L * samples + 1) * sampleNanos / 2;
        return ageNanos < spanNanos() ? Math.max(young, ageNanos) : steady;
    }

    /** The longest time a sensor's samples span: how far back its bytes can reach. */
    long spanNanos() {
        return (samples + 1L) * sampleNanos;
    }

    /** How often the shim re-tells Kafka a bound that moves with time: a quarter of a sample. */
    long tickNanos() {
        return Math.max(1L, sampleNanos / 4);
    }

    private static int intSetting(Map<String, ?> configs, String key, int fallback) {
        Object value = configs.get(key);
        if (value == null) {
            return fallback;
        }
        try {
            int parsed = Integer.parseInt(value.toString().trim());
            if (parsed >= 1) {
                return parsed;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new ConfigException(key, value, "the shim reads Kafka's quota window from it: an integer >= 1");
    }
}
