#[test]
fn find_coordinator_request_v1() -> Result<()> {
    let v = vec![
        0, 0, 0, 19, 0, 10, 0, 1, 0, 0, 0, 0, 255, 255, 0, 6, 97, 98, 99, 100, 101, 102, 0,
    ];

    Ok(())
}
