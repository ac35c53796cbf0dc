#[test]
fn fetch_request_v16() -> Result<()> {
    let encoded = vec![
        0, 0, 0, 52, 0, 1, 0, 16, 0, 0, 0, 12, 0, 16, 99, 111, 110, 115, 111, 108, 101, 45, 99,
        111, 110, 115, 117, 109, 101, 114, 0, 0, 0, 1, 244, 0, 0, 0, 1, 3, 32, 0, 0, 0, 0, 0, 0, 0,
        255, 255, 255, 255, 1, 1, 1, 0,
    ];
    let frame = Frame::request_from_bytes(&encoded[..])?;
    assert_eq!(frame.max_wait_ms, 500);

    Ok(())
}
