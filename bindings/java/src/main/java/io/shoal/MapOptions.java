package io.shoal;

/**
 * Options of {@link ShoalStore#map(String, Codec, Codec, MapOptions)}: whether to create
 * the map, and whether a map created keeps a stable UID per key. Immutable.
 */
public final class MapOptions {
    final boolean create;
    final boolean uids;

    private MapOptions(boolean create, boolean uids) {
        this.create = create;
        this.uids = uids;
    }

    /** @return create if missing, no UIDs */
    public static MapOptions defaults() {
        return new MapOptions(true, false);
    }

    /**
     * @param create false to raise {@link NotFoundException} rather than create a missing map
     * @return new options
     */
    public MapOptions create(boolean create) {
        return new MapOptions(create, uids);
    }

    /**
     * @param uids true to give each key of a created map a stable UID
     *     ({@link ShoalMap#uid}, {@link ShoalMap#getByUid}); an existing map without UIDs
     *     then raises {@link InvalidArgumentException}
     * @return new options
     */
    public MapOptions uids(boolean uids) {
        return new MapOptions(create, uids);
    }
}
